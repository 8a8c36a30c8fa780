# petri's helper for R: the R entry of the table of languages runs
# `Rscript FILE` with R_PROFILE_USER set to this file.  It leaves what the
# driver turns into results in $PETRI_RESULTS (docs/languages.md):
#   out-NNNN.txt      each visible value of a top-level expression, as R's
#                     prompt would print it, as IRkernel (E2B's R) gives it:
#                     a result instead of stdout.  print() still writes to
#                     stdout; an assignment or invisible() shows nothing.
#   plot-NNN-MMM.png  every page of every plot, for the device R opens
#                     itself (R closes them, and so writes the last page, as
#                     it exits)
#   error.json        {name, message, traceback} of the error that ended the
#                     script; R has printed it on stderr already.  An error a
#                     tryCatch() handles is no error here.
#
# The values: R opens FILE for its prompt before it reads this profile, and
# reads FILE only once it has.  So the profile parses FILE and writes it
# again, in place, each top-level expression E as
#   {.petri_value <<- .Internal(withVisible({E})); .petri_show()}
# which R's prompt then runs one by one as it would have run E: at top level
# (the .Internal and the braces are no function call: an error or a warning
# is reported as R reports it there, with the same call), its warnings
# printed after it, and it prints nothing, since the whole is invisible.
# .petri_show() writes E's value, when visible, to the next out-NNNN.txt.
# Code that does not parse runs not at all (as Python, and IRkernel): the
# error names the line.
local({
	results <- Sys.getenv("PETRI_RESULTS")
	if (!nzchar(results))
		return(invisible())
	VALUES_MAX <- 100L		# values as results; the rest print on stdout
	PLAIN_MAX <- 65536		# a value's text is cut there (the driver's cap)

	plots <- 0L
	options(device = function(...) {
		plots <<- plots + 1L
		grDevices::png(file.path(results, sprintf("plot-%03d-%%03d.png", plots)), ...)
	})

	json <- function(s) {
		s <- gsub("[\001-\010\013-\037\177]", " ", paste(s, collapse = "\n"))
		encodeString(enc2utf8(s), quote = "\"")
	}
	failed <- function(name, message, traceback) {
		writeLines(sprintf("{\"name\": %s, \"message\": %s, \"traceback\": %s}", json(name),
				   json(message), json(traceback)),
			   file.path(results, "error.json"))
		quit(save = "no", status = 1)
	}

	# The value being written (its sink still open), for an error that
	# ends the script in the middle of printing it.
	pending <- NULL

	last <- NULL
	globalCallingHandlers(error = function(e) last <<- e)
	options(error = function() {
		if (!is.null(pending))
			done()
		e <- last
		failed(if (is.null(e)) "Error" else class(e)[1],
		       if (is.null(e)) geterrmessage() else conditionMessage(e),
		       trimws(geterrmessage()))
	})

	# A value's file as a result: no trailing newline, at most PLAIN_MAX
	# bytes (cut at a character), none at all when print() wrote nothing.
	done <- function() {
		path <- pending$path
		sink()
		close(pending$con)
		pending <<- NULL
		size <- file.size(path)
		data <- if (is.na(size) || size == 0) raw() else
			readBin(path, "raw", n = min(size, PLAIN_MAX + 1))
		if (length(data) > PLAIN_MAX) {
			data <- data[seq_len(PLAIN_MAX)]
			lead <- PLAIN_MAX
			while (lead > 1 && bitwAnd(as.integer(data[lead]), 0xC0) == 0x80)
				lead <- lead - 1
			byte <- as.integer(data[lead])
			need <- if (byte >= 0xF0) 4 else if (byte >= 0xE0) 3 else if (byte >= 0xC0) 2 else 1
			if (lead + need - 1 > PLAIN_MAX)
				data <- data[seq_len(lead - 1)]
			data <- c(data, charToRaw(sprintf("\n... [text/plain cut at 64 KiB of %.0f bytes]",
							  size)))
		} else if (length(data) && data[length(data)] == as.raw(10))
			data <- data[-length(data)]
		if (length(data))
			writeBin(data, path)
		else
			unlink(path)
	}

	# Sends what print() writes to the next out-NNNN.txt, when it can:
	# past VALUES_MAX values, or without a file, the value prints on stdout.
	values <- 0L
	start <- function() {
		values <<- values + 1L
		if (values > VALUES_MAX) {
			if (values == VALUES_MAX + 1L)
				cat(sprintf("[petri] more than %d values: the rest are printed on stdout\n",
					    VALUES_MAX), file = stderr())
			return(FALSE)
		}
		path <- file.path(results, sprintf("out-%04d.txt", values))
		con <- tryCatch(file(path, "w"), error = function(e) NULL)
		if (is.null(con))
			return(FALSE)
		sink(con)
		pending <<- list(path = path, con = con)
		TRUE
	}

	# Where the rewritten code finds its two names: an environment on the
	# search path (as RStudio's tools:rstudio), not the user's workspace,
	# which rm(list = ls(all.names = TRUE)) may empty.
	tools <- attach(NULL, name = "tools:petri")
	assign(".petri_value", NULL, envir = tools)
	assign(".petri_show", function() {
		x <- tools$.petri_value
		tools$.petri_value <- NULL
		if (!isTRUE(x$visible))
			return(invisible(x$value))
		x <- x$value
		sunk <- start()
		print(x)	# as R's prompt prints (show() for an S4 object)
		if (sunk)
			done()
		invisible(x)
	}, envir = tools)
	lockBinding(".petri_show", tools)

	# Only the driver's own copy of the code, beside $PETRI_RESULTS, is
	# rewritten, by the R the driver started: an R that the code starts
	# (system("Rscript x.R")) reads this profile too, and runs the user's
	# file as plain Rscript would.
	file <- sub("^--file=", "", grep("^--file=", commandArgs(), value = TRUE))
	below <- nzchar(Sys.getenv("PETRI_R_CODE"))
	if (length(file) != 1 || below || normalizePath(dirname(file), mustWork = FALSE) !=
	    normalizePath(dirname(results), mustWork = FALSE))
		return(invisible())
	Sys.setenv(PETRI_R_CODE = file)
	lines <- tryCatch(readLines(file, warn = FALSE), error = function(e) NULL)
	if (is.null(lines))
		return(invisible())
	exprs <- tryCatch(parse(text = lines, keep.source = TRUE,
				srcfile = srcfilecopy(basename(file), lines)),
			  error = function(e) e)
	if (inherits(exprs, "error")) {
		message <- conditionMessage(exprs)
		cat("Error: ", message, "\n", sep = "", file = stderr())
		failed(class(exprs)[1], message, paste0("Error: ", message))
	}
	# Each expression's text: its whole lines when it has them to itself
	# (as it almost always has); cut from them by its bytes when it shares
	# one (x <- 1; x), or deparsed when such lines are not all ASCII (R
	# 4.2's parser counts the bytes of a non-ASCII character in a string
	# twice).  A srcref's 7th and 8th numbers are its lines in the text.
	refs <- attr(exprs, "srcref")
	from <- vapply(refs, function(ref) ref[7], 0L)
	to <- vapply(refs, function(ref) ref[8], 0L)
	n <- length(refs)
	shared <- c(FALSE, from[-1] <= to[-n]) | c(to[-n] >= from[-1], FALSE)
	cut <- function(s, from, to) rawToChar(charToRaw(s)[from:to])
	text <- function(i) {
		ref <- refs[[i]]
		part <- lines[from[i]:to[i]]
		if (!shared[i])
			return(part)
		if (any(grepl("[^\001-\177]", part, useBytes = TRUE)))
			return(deparse(exprs[[i]], width.cutoff = 500L,
				       control = c("keepInteger", "showAttributes", "keepNA",
						   "niceNames", "digits17")))
		k <- length(part)
		if (k == 1)
			return(cut(part, ref[2], ref[4]))
		part[k] <- cut(part[k], 1, ref[4])
		part[1] <- cut(part[1], ref[2], nchar(part[1], "bytes"))
		part
	}
	# withVisible() is a closure around an .Internal in R 4.2: its
	# .Internal, or withVisible() itself should it become a primitive.
	wrap <- if (is.primitive(withVisible))
		c("{.petri_value <<- withVisible({", "}); .petri_show()}") else
		c("{.petri_value <<- .Internal(withVisible({", "})); .petri_show()}")
	code <- vapply(seq_len(n), function(i) paste(c(wrap[1], text(i), wrap[2]), collapse = "\n"), "")
	writeLines(code, file)
})
