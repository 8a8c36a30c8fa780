# Installing and packaging petri.  Included by the top-level Makefile.
#
#   make install      the binary, man pages, systemd unit, example
#                     configuration and docs under $(DESTDIR)$(PREFIX)
#                     (PREFIX=/usr/local by default; the example goes to
#                     $(SYSCONFDIR)/petri, /etc, where petri looks for its
#                     configuration whatever the prefix)
#   make uninstall    removes exactly what install wrote (same variables),
#                     and petri's own directories once empty
#   make deb          $(BUILD)/petri_<version>_<arch>.deb with dpkg-deb
#
# Nothing is enabled or started: `systemctl enable --now petri` is the
# administrator's (README.md, "Install").

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
DOCDIR     ?= $(PREFIX)/share/doc/petri
# systemd reads /usr/local/lib/systemd/system as well as /usr/lib and /lib.
UNITDIR    ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR ?= /etc
INSTALL    ?= install

MAN1      := $(wildcard man/*.1)
MAN5      := $(wildcard man/*.5)
DOC_FILES := README.md $(wildcard docs/*.md docs/*.png) docs/openapi.json
UNIT      := packaging/petri.service
EXAMPLE   := packaging/petri.ini.example

# Every file install writes, relative to $(DESTDIR); uninstall removes these.
INSTALLED := $(BINDIR)/petri $(UNITDIR)/petri.service \
	     $(SYSCONFDIR)/petri/petri.ini.example \
	     $(MAN1:man/%=$(MANDIR)/man1/%) $(MAN5:man/%=$(MANDIR)/man5/%) \
	     $(DOCDIR)/README.md $(filter-out README.md,$(DOC_FILES:%=$(DOCDIR)/%))
# The directories that are petri's alone (innermost first).
OWN_DIRS  := $(DOCDIR)/docs $(DOCDIR) $(SYSCONFDIR)/petri

install: $(BUILD)/petri
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/petri \
		$(DESTDIR)$(DOCDIR)/docs
	$(INSTALL) -m 0755 $(BUILD)/petri $(DESTDIR)$(BINDIR)/petri
	sed 's|^ExecStart=/usr/local/bin/petri |ExecStart=$(BINDIR)/petri |' $(UNIT) > $(DESTDIR)$(UNITDIR)/petri.service.tmp
	chmod 0644 $(DESTDIR)$(UNITDIR)/petri.service.tmp
	mv -f $(DESTDIR)$(UNITDIR)/petri.service.tmp $(DESTDIR)$(UNITDIR)/petri.service
	$(INSTALL) -m 0644 $(EXAMPLE) $(DESTDIR)$(SYSCONFDIR)/petri/petri.ini.example
	$(if $(MAN1),$(INSTALL) -d $(DESTDIR)$(MANDIR)/man1 && $(INSTALL) -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/)
	$(if $(MAN5),$(INSTALL) -d $(DESTDIR)$(MANDIR)/man5 && $(INSTALL) -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/)
	$(INSTALL) -m 0644 README.md $(DESTDIR)$(DOCDIR)/README.md
	$(INSTALL) -m 0644 $(filter-out README.md,$(DOC_FILES)) $(DESTDIR)$(DOCDIR)/docs/

# An administrator's petri.ini beside the example stays, and so does /etc/petri.
uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(addprefix $(DESTDIR),$(OWN_DIRS)) 2>/dev/null

# ---- the Debian package --------------------------------------------------
#
# Built from `make install` into a staging tree with Debian's paths (units
# in /lib/systemd/system, as bookworm's packages have them), the binary
# stripped, man pages compressed; the control file's Depends are the shared
# libraries the binary links (dpkg-shlibdeps), the Python the embedded
# template extension was built for, and the packages the sandboxes use
# (packaging/depends; scripts/deps installs the same).  Maintainer scripts:
# packaging/debian/.
DEB_VERSION    = $(shell packaging/deb-version '$(VERSION)')
DEB_ARCH      := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_MAINTAINER ?= petri maintainers <petri@localhost>
DEB_STAGE     := $(BUILD)/deb
DEB_ROOT      := $(DEB_STAGE)/root
PY_MINOR      := $(shell $(PYTHON) -c 'import sys; print("%d.%d %d.%d" % (sys.version_info[:2] + (sys.version_info[0], sys.version_info[1] + 1)))' 2>/dev/null)
PY_DEPENDS     = python3 (>= $(word 1,$(PY_MINOR))), python3 (<< $(word 2,$(PY_MINOR)))
comma         := ,
list_of        = $(shell sed -e 's/\#.*//' -e '/^[[:space:]]*$$/d' $(1) | paste -sd, - | sed 's/,/, /g')

deb: $(BUILD)/petri
	rm -rf $(DEB_STAGE) $(BUILD)/petri_*.deb
	$(MAKE) --no-print-directory install BUILD=$(BUILD) DESTDIR=$(abspath $(DEB_ROOT)) \
		PREFIX=/usr UNITDIR=/lib/systemd/system SYSCONFDIR=/etc
	strip --strip-unneeded --remove-section=.comment --remove-section=.note $(DEB_ROOT)/usr/bin/petri
	if [ -d $(DEB_ROOT)/usr/share/man ]; then find $(DEB_ROOT)/usr/share/man -type f -exec gzip -9n {} +; fi
	printf '%s\n' 'petri $(DEB_VERSION)' '' \
		'The program, its documentation (README.md, docs/) and this package come' \
		'from the petri repository; see README.md for its terms.' \
		> $(DEB_ROOT)/usr/share/doc/petri/copyright
	$(INSTALL) -d -m 0755 $(DEB_ROOT)/DEBIAN $(DEB_STAGE)/debian
	$(INSTALL) -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm \
		$(DEB_ROOT)/DEBIAN/
	echo /etc/petri/petri.ini.example > $(DEB_ROOT)/DEBIAN/conffiles
	printf 'Source: petri\n\nPackage: petri\nArchitecture: any\n' > $(DEB_STAGE)/debian/control
	cd $(DEB_STAGE) && dpkg-shlibdeps -O root/usr/bin/petri | sed -n 's/^shlibs:Depends=//p' > shlibs
	test -s $(DEB_STAGE)/shlibs
	{ echo 'Package: petri'; \
	  echo 'Version: $(DEB_VERSION)'; \
	  echo 'Architecture: $(DEB_ARCH)'; \
	  echo 'Maintainer: $(DEB_MAINTAINER)'; \
	  echo "Installed-Size: $$(du -sk --exclude=DEBIAN $(DEB_ROOT) | cut -f1)"; \
	  echo "Depends: $$(cat $(DEB_STAGE)/shlibs), $(PY_DEPENDS), $(filter-out python3 python3$(comma),$(call list_of,packaging/depends))"; \
	  echo 'Recommends: $(call list_of,packaging/recommends)'; \
	  echo 'Section: admin'; \
	  echo 'Priority: optional'; \
	  echo 'Description: sandbox that runs AI-written code'; \
	  echo ' petri runs code that a model (or a person) wrote in a sandbox made of'; \
	  echo ' namespaces, seccomp, cgroups and Landlock, and hands back what came out:'; \
	  echo ' text, values, tables, charts, files, or an error the model can read.'; \
	  echo ' It serves an HTTP API (petri serve, a systemd unit that is installed'; \
	  echo ' but not enabled), the Model Context Protocol (petri mcp) and a CLI.'; \
	} > $(DEB_ROOT)/DEBIAN/control
	cd $(DEB_ROOT) && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | \
		xargs -0 md5sum > DEBIAN/md5sums
	dpkg-deb --root-owner-group --build $(DEB_ROOT) $(BUILD)/petri_$(DEB_VERSION)_$(DEB_ARCH).deb

.PHONY: install uninstall deb
