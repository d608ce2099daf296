# Shared by bench/*.sh: build, Debian packages, background servers started
# and stopped by PID, a private temporary directory, the machine's figures.
# shellcheck shell=bash

bench_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${TFB_BENCH_BUILD:-$bench_root/build/bench}
BENCH_PIDS=()

bench_init() {
  BENCH_TMP=$(mktemp -d /tmp/tfb-bench.XXXXXX)
  # A home of its own, without ~/.tfbarrier/secret: a host on loopback then
  # runs without authentication (auth=none), which is what is measured here.
  export HOME=$BENCH_TMP/home
  mkdir -p "$HOME"
  unset TFBARRIER_SECRET_FILE TFBARRIER_ADDR TFBARRIER_N TFBARRIER_RANK TFBARRIER_SCOPE
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

bench_cleanup() {
  local p
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  BENCH_PIDS=()
  [ -n "${BENCH_TMP:-}" ] && rm -rf "$BENCH_TMP"
}

# Release build of tfbarrier and the bench tools, in $BUILD (default build/bench).
bench_build() {
  cmake -S "$bench_root" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTFB_TESTS=OFF -DTFB_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j"${BENCH_JOBS:-1}" --target tfbarrier tfb_loadgen tfb_roundrun tfb_floor_a_server \
    tfb_floor_a_client tfb_floor_p_client tfb_floor_b_server tfb_noop tfb_cpuid_cost >/dev/null
  TFB=$BUILD/tfbarrier
  # shellcheck disable=SC2034  # BIN is used by the scripts that source this file
  BIN=$BUILD/bench
}

# need_pkgs PKG...: installs the Debian packages that are missing. Returns 1
# when they cannot be installed (the caller says so in its table).
need_pkgs() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "bench: installing ${missing[*]} (Debian)" >&2
  local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >"$BENCH_TMP/apt.log" 2>&1 && return 0
  apt-get -o DPkg::Lock::Timeout=600 -q update >>"$BENCH_TMP/apt.log" 2>&1 || true
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >>"$BENCH_TMP/apt.log" 2>&1 && return 0
  echo "bench: could not install ${missing[*]}; see below" >&2
  tail -n 5 "$BENCH_TMP/apt.log" >&2
  return 1
}

# start_server VAR KEY command...: starts command in the background and waits
# (60 s at most) for a line KEY=VALUE on its stdout; sets VAR=VALUE and
# VAR_PID to its pid.
start_server() {
  local var=$1 key=$2
  shift 2
  local out
  out=$(mktemp "$BENCH_TMP/server.XXXXXX")
  "$@" >"$out" 2>>"$BENCH_TMP/servers.log" </dev/null &
  local pid=$!
  BENCH_PIDS+=("$pid")
  printf -v "${var}_PID" '%s' "$pid"
  for _ in $(seq 600); do
    if grep -q "^$key=" "$out"; then
      printf -v "$var" '%s' "$(sed -n "s/^$key=//p" "$out" | head -n 1)"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench: '$*' did not start:" >&2
  tail -n 20 "$BENCH_TMP/servers.log" >&2
  return 1
}

# stop_server PID: stops one server this script started, and forgets it.
stop_server() {
  local pid=$1 p keep=()
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  for p in "${BENCH_PIDS[@]}"; do [ "$p" = "$pid" ] || keep+=("$p"); done
  BENCH_PIDS=("${keep[@]}")
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

machine_info() {
  local model mem
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
  mem=$(awk '/^MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)
  echo "machine: $(nproc) cores ($model), $mem GiB, Linux $(uname -r); load average now $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "tfbarrier: $("$TFB" --version) built in $BUILD ($(git -C "$bench_root" describe --always --dirty 2>/dev/null || echo '?'))"
}

# field KEY: the value of KEY=VALUE in each line of stdin.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p; s/^$1=\([^ ]*\).*/\1/p"; }

# median: of the numbers on stdin, one a line.
median() {
  sort -g | awk '{v[NR] = $1} END {if (NR == 0) print ""; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
