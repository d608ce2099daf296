#!/usr/bin/env bats
# Shipping: scripts/package builds a lintian-clean .deb of this version, which
# installs with dpkg -i, puts the binary (linked to nothing but glibc), the
# man pages and the completions in place, and goes away again
# with dpkg -r, leaving the machine as it was. Also: the Spack recipe and the
# Lmod modulefile are well-formed.
#
# The .deb is built once for the file (a Release build in build/package: about
# a minute with a warm ccache, several without). The dpkg tests need root and
# dpkg-deb, and skip when a tfbarrier package or /usr/bin/tfbarrier is there
# already, so as not to touch what someone installed.
load helpers

setup_file() {
  ROOT=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
  export ROOT
  export PACKAGE_OUT=$BATS_FILE_TMPDIR/package.out PACKAGE_SKIP=$BATS_FILE_TMPDIR/package.skip
  if [ "$(id -u)" -ne 0 ]; then
    echo "not root: the .deb is neither built nor installed (run as root)" >"$PACKAGE_SKIP"
  elif ! command -v dpkg-deb >/dev/null || ! command -v dpkg >/dev/null; then
    echo "dpkg-deb is not installed: this is not a Debian system" >"$PACKAGE_SKIP"
  elif dpkg-query -W -f='${Status}' tfbarrier 2>/dev/null | grep -q 'ok installed'; then
    echo "a tfbarrier package is installed already: left alone" >"$PACKAGE_SKIP"
  elif [ -e /usr/bin/tfbarrier ]; then
    echo "/usr/bin/tfbarrier exists and belongs to no package: left alone" >"$PACKAGE_SKIP"
  else
    # Only the .deb: the .rpm is not tested here. What it needs, scripts/deps test
    # installs: the suite installs nothing.
    TFB_PACKAGE_NO_INSTALL=1 "$ROOT/scripts/package" deb >"$PACKAGE_OUT" 2>&1
    echo $? >"$BATS_FILE_TMPDIR/package.status"
  fi
}

setup() {
  setup_common
  INSTALLED=$BATS_TEST_TMPDIR/installed
}

teardown() {
  teardown_common
  # Whatever happened, take our package away again.
  if [ -e "$INSTALLED" ]; then
    dpkg -r tfbarrier >/dev/null 2>&1 || true
    dpkg --purge tfbarrier >/dev/null 2>&1 || true
  fi
}

need_deb() {
  [ ! -e "$PACKAGE_SKIP" ] || skip "$(cat "$PACKAGE_SKIP")"
  local status
  status=$(cat "$BATS_FILE_TMPDIR/package.status")
  if [ "$status" -ne 0 ]; then
    echo "scripts/package deb exited $status:" >&2
    cat "$PACKAGE_OUT" >&2
    return 1
  fi
  DEB=$(tail -n 1 "$PACKAGE_OUT")
  [ -f "$DEB" ] || { echo "no .deb at '$DEB':" >&2; cat "$PACKAGE_OUT" >&2; return 1; }
}

@test "scripts/package builds a .deb named and versioned as tfbarrier --version" {
  need_deb
  local version
  version=$("$TFB" --version | awk '{print $2}')
  [[ $DEB == */build/package/tfbarrier_${version}_*.deb ]]
  run dpkg-deb --field "$DEB" Package Version Section Maintainer
  assert_success
  assert_line "Package: tfbarrier"
  assert_line "Version: $version"
  assert_line "Section: utils"
  assert_line --regexp '^Maintainer: .+ <.+@.+>$'
}

@test "the .deb depends only on libc6, and libcurl4 for the etcd module (libstdc++ and fmt are linked in)" {
  need_deb
  run dpkg-deb --field "$DEB" Depends
  assert_success
  local deps
  deps=$(tr ',' '\n' <<<"$output" | sed -E 's/^ *//; s/ .*//' | sort | tr '\n' ' ')
  assert_equal "$deps" "libc6 libcurl4 "
  # The binary itself needs libc alone: only `serve --store` loads the module.
  local x=$BATS_TEST_TMPDIR/x
  dpkg-deb -x "$DEB" "$x"
  run -0 readelf -d "$x/usr/bin/tfbarrier"
  refute_output --partial libcurl
  run -0 readelf -d "$x/usr/lib/tfbarrier/modules/tfbarrier-etcd.so"
  assert_output --partial libcurl
}

@test "the packaged binary is PIE (Debian hardening); the default build is position-dependent (start-up)" {
  need_deb
  local x=$BATS_TEST_TMPDIR/x
  dpkg-deb -x "$DEB" "$x"
  run -0 readelf -h "$x/usr/bin/tfbarrier"
  assert_line --regexp 'Type: +DYN'
  run -0 readelf -h "$TFB"
  assert_line --regexp 'Type: +EXEC'
}

@test "lintian finds no error and no warning in the .deb" {
  need_deb
  grep -q '^== lintian ' "$PACKAGE_OUT" || skip "lintian is not installed (scripts/deps test installs it): the .deb was not checked"
  run grep -E '^[EW]: ' "$PACKAGE_OUT"
  assert_failure
}

@test "dpkg -i installs it: binary, man pages, completions; dpkg -r removes it all" {
  need_deb
  run dpkg -i "$DEB"
  assert_success
  touch "$INSTALLED"

  run /usr/bin/tfbarrier --version
  assert_success
  assert_output "$("$TFB" --version)"
  run man -w tfbarrier
  assert_success
  assert_output /usr/share/man/man1/tfbarrier.1.gz
  run man -w 7 tfbarrier-protocol
  assert_success
  assert_output /usr/share/man/man7/tfbarrier-protocol.7.gz
  [ -f /usr/share/bash-completion/completions/tfbarrier ]
  [ -f /usr/share/zsh/vendor-completions/_tfbarrier ]
  [ -f /usr/share/doc/tfbarrier/copyright ]
  [ -f /usr/share/doc/tfbarrier/LICENSE ]
  [ -f /usr/share/doc/tfbarrier/README.md ]

  # libstdc++ and libgcc are linked in and fmt is header-only.
  run ldd /usr/bin/tfbarrier
  assert_success
  refute_output --partial libstdc++
  refute_output --partial libfmt
  refute_output --partial libgcc_s

  # It works as installed: a host and two participants.
  local out=$BATS_TEST_TMPDIR/daemon.out
  /usr/bin/tfbarrier serve --daemon --listen 127.0.0.1:0 --idle-exit 2m --log "$BATS_TEST_TMPDIR/host.log" >"$out" 2>"$BATS_TEST_TMPDIR/daemon.err" 3>&-
  eval "$(cat "$out")"
  HOST_PIDS+=("$TFBARRIER_PID")
  /usr/bin/tfbarrier wait --name installed --n 2 --rank 1 --quiet 3>&- &
  run /usr/bin/tfbarrier wait --name installed --n 2 --rank 0 --timeout 20s --quiet
  assert_success
  wait
  kill "$TFBARRIER_PID"
  # serve --store finds its module where the package put it (nothing answers at
  # this etcd; --insecure: no key needed to get that far).
  run -69 /usr/bin/tfbarrier serve --listen 127.0.0.1:0 --store "etcd://127.0.0.1:$(free_port)" --insecure
  assert_output --partial "no etcd endpoint answered"
  refute_output --partial "cannot load the etcd module"

  run dpkg -r tfbarrier
  assert_success
  [ ! -e /usr/bin/tfbarrier ]
  [ ! -e /usr/lib/tfbarrier ]
  [ ! -e /usr/share/man/man1/tfbarrier.1.gz ]
  [ ! -e /usr/share/bash-completion/completions/tfbarrier ]
  run dpkg-query -W -f='${Status}' tfbarrier
  refute_output --partial 'ok installed'
}

@test "the Spack recipe is Python and depends on asio, cli11, fmt, nlohmann-json and cmake, not openssl" {
  local recipe=$ROOT/packaging/spack/package.py
  run /usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' "$recipe"
  assert_success
  grep -q '^class Tfbarrier(CMakePackage):' "$recipe"
  local dep
  for dep in asio cli11 fmt nlohmann-json cmake; do
    grep -qE "depends_on\(\"$dep(@[^\"]*)?\"" "$recipe" || { echo "no depends_on($dep)" >&2; return 1; }
  done
  ! grep -q 'depends_on("openssl' "$recipe" || false
  grep -q "version(\"$("$TFB" --version | awk '{print $2}')\")" "$recipe"
}

@test "the Lmod modulefile is Lua that prepends PATH and MANPATH for this version" {
  local version
  version=$("$TFB" --version | awk '{print $2}')
  local mf=$ROOT/packaging/lmod/tfbarrier/$version.lua
  [ -f "$mf" ]
  grep -q '^prepend_path("PATH", pathJoin(root, "bin"))' "$mf"
  grep -q '^prepend_path("MANPATH", pathJoin(root, "share/man"))' "$mf"
  grep -q '^help(\[\[' "$mf"
  if command -v luac >/dev/null; then
    run luac -p "$mf"
    assert_success
  fi
}
