# petri's helper for R: the R entry of the table of languages runs
# `Rscript FILE` with R_PROFILE_USER set to this file, so that R prints
# values as at its prompt (Rscript's own behaviour) and this file adds what
# the driver turns into results, in $PETRI_RESULTS (docs/languages.md):
#   plot-NNN-MMM.png  every page of every plot, for the device R opens
#                     itself (R closes them, and so writes the last page, as
#                     it exits)
#   error.json        {name, message, traceback} of the error that ended the
#                     script; R has printed it on stderr already.  An error a
#                     tryCatch() handles is no error here.
local({
	results <- Sys.getenv("PETRI_RESULTS")
	if (!nzchar(results))
		return(invisible())
	plots <- 0L
	options(device = function(...) {
		plots <<- plots + 1L
		grDevices::png(file.path(results, sprintf("plot-%03d-%%03d.png", plots)), ...)
	})
	last <- NULL
	globalCallingHandlers(error = function(e) last <<- e)
	json <- function(s) {
		s <- gsub("[\001-\010\013-\037\177]", " ", paste(s, collapse = "\n"))
		encodeString(enc2utf8(s), quote = "\"")
	}
	options(error = function() {
		e <- last
		name <- if (is.null(e)) "Error" else class(e)[1]
		msg <- if (is.null(e)) geterrmessage() else conditionMessage(e)
		writeLines(sprintf("{\"name\": %s, \"message\": %s, \"traceback\": %s}", json(name),
				   json(msg), json(trimws(geterrmessage()))),
			   file.path(results, "error.json"))
		quit(save = "no", status = 1)
	})
})
