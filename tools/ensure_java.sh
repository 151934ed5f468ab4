#!/bin/sh
# A Java runtime for the Spark tests (pyspark 4 needs Java 17 or newer); `make test` runs this.
# Where one is found (JAVA_HOME first, then PATH, as capbook.logs.engines looks) it does nothing.
# Where it is missing or older, as root with apt-get (CI on Debian), it installs Debian's
# default-jre-headless (OpenJDK 17 on Debian 12, 21 on Debian 13); otherwise it prints one
# warning line saying how to install one. It always exits 0: without Java the Spark tests skip
# and say why (under CI=true they fail instead).
set -u
MIN=17

java_bin() {
  if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
    echo "$JAVA_HOME/bin/java"
  else
    command -v java
  fi
}

# The major version of a java executable: 17 for 'version "17.0.15"', 8 for 'version "1.8.0_392"'.
java_major() {
  "$1" -version 2>&1 | sed -n 's/.*version "1\.\([0-9][0-9]*\).*/\1/p; t; s/.*version "\([0-9][0-9]*\).*/\1/p'
}

# Empty when a Java 17+ runtime is there, else what is wrong.
java_problem() {
  java=$(java_bin) || java=""
  if [ -z "$java" ]; then
    echo "no Java runtime on PATH or in JAVA_HOME"
    return
  fi
  major=$(java_major "$java")
  if [ -n "$major" ] && [ "$major" -lt "$MIN" ]; then
    echo "$java is Java $major, older than $MIN"
  fi
}

problem=$(java_problem)
[ -z "$problem" ] && exit 0

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "$problem: installing default-jre-headless with apt-get for the Spark tests"
  # minimal images may lack the man folder the JRE's update-alternatives links into
  [ -d /usr/share/man/man1 ] || mkdir -p /usr/share/man/man1
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null) \
    || echo "warning: apt-get could not install default-jre-headless" >&2
  problem=$(java_problem)
  [ -z "$problem" ] && exit 0
fi
echo "warning: $problem; the Spark tests will skip (fail under CI=true): install Java $MIN or newer," \
  "e.g. sudo apt-get install default-jre-headless, or point JAVA_HOME at one" >&2
exit 0
