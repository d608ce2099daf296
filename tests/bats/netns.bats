#!/usr/bin/env bats
# tfbarrier across a real (private) network: node1..node3 are network
# namespaces with their own addresses 10.231.0.1..3 on one bridge, made by
# tests/infra/netns-up.sh 3. The host runs in tfb-node1, participants in
# tfb-node2 and tfb-node3. Every tfbarrier here runs under `ip netns exec`:
# no traffic leaves these namespaces, and nothing in the root namespace ever
# connects to 10.231.x (netns-up.sh's guard route would refuse it anyway).
# Root only.
load helpers

INFRA=$BATS_TEST_DIRNAME/../infra

setup_file() {
  # (bats 1.8 cannot skip from setup_file: setup skips each test instead)
  if [ "$(id -u)" -ne 0 ]; then
    export ROOT_SKIP="needs root: builds network namespaces with tests/infra/netns-up.sh 3"
    return 0
  fi
  "$INFRA/netns-up.sh" 3
}

teardown_file() {
  if [ -n "${ROOT_SKIP:-}" ]; then return 0; fi
  "$INFRA/netns-down.sh"
}

setup() {
  if [ -n "${ROOT_SKIP:-}" ]; then skip "$ROOT_SKIP"; fi
  setup_common
  cd "$BATS_TEST_TMPDIR" || return
  # shellcheck disable=SC2034  # read by spawn (helpers.bash)
  SPAWN_LIMIT=90  # a participant waits through a link that is down for a while
  # Beyond loopback serve refuses to run without authentication unless told
  # --insecure, and a participant refuses such a host (exit 77) unless told
  # TFBARRIER_INSECURE=1 (or --insecure): these tests are about the network.
  INSECURE=(--insecure)
  NODE_ENV=(TFBARRIER_INSECURE=1)
  start_ns_host
}

teardown() {
  if [ -n "${ROOT_SKIP:-}" ]; then return 0; fi
  ip -n tfb-node3 link set eth0 up 2>/dev/null || true
  teardown_common
}

# in_node NODE: the command that runs a program inside tfb-NODE with no
# variables but HOME, PATH and those of NODE_ENV (`ip netns exec` and `env`
# exec it), in IN_NODE.
in_node() { IN_NODE=(ip netns exec "tfb-$1" env -i HOME="$HOME" PATH=/usr/bin:/bin "${NODE_ENV[@]}"); }

# tfb_in NODE ARGS...: tfbarrier inside tfb-NODE.
tfb_in() {
  in_node "$1"
  shift
  "${IN_NODE[@]}" "$TFB" "$@"
}

# start_ns_host: `tfbarrier serve` on 10.231.0.1, port 0, inside tfb-node1.
# Sets HOST_PID, PORT and HOST_LOG. Nothing in the root namespace is to
# connect to it, so TFBARRIER_ADDR is not left set.
start_ns_host() {
  in_node node1
  # shellcheck disable=SC2034  # read by start_host_on (helpers.bash)
  HOST_WRAP=("${IN_NODE[@]}")
  start_host_on 10.231.0.1:0 "${INSECURE[@]}"
  unset TFBARRIER_ADDR
  PORT=$HOST_PORT
  [ "$(ip netns identify "$HOST_PID")" = tfb-node1 ]
}

# participant NODE LABEL ADDR [wait options]: `tfbarrier wait --name x` in
# tfb-NODE, spawned as LABEL.
participant() {
  local node=$1 label=$2 addr=$3
  shift 3
  in_node "$node"
  spawn "$label" "${IN_NODE[@]}" "$TFB" wait --name x --addr "$addr" "$@"
}

# arrived_is COUNT [seconds]: waits until barrier x holds COUNT arrivals, asking
# the host from tfb-node2.
arrived_is() {
  local count=$1 limit=${2:-10}
  for _ in $(seq $((limit * 10))); do
    if tfb_in node2 status --addr "node1:$PORT" --name x --json --connect-timeout 2s 2>/dev/null |
        grep -q "\"arrived\": $count,"; then
      return 0
    fi
    sleep 0.1
  done
  echo "barrier x never held $count arrivals; status:" >&2
  tfb_in node2 status --addr "node1:$PORT" --all-scopes >&2 || true
  cat "$HOST_LOG" >&2
  return 1
}

# names_missing_rank2 DURATION HOW ERR...: each timed-out participant's error names
# rank 2 (the one that withdrew last also names the other one, gone before it:
# "0,2", or "1-2" as the host writes runs of ranks), and says how rank 2 is missing:
# HOW=never (it never arrived) or HOW=unresponsive (it arrived, then stopped answering).
names_missing_rank2() {
  local after=$1 how=$2 f
  shift 2
  for f in "$@"; do
    run -0 cat "$f"
    assert_output --regexp "timed out after $after waiting at barrier x \\(round 1\\): [12]/3 arrived; missing ranks (2|0,2|1-2);"
    if [ "$how" = never ]; then
      assert_output --partial 'never arrived'
      refute_output --partial 'rank 2 stopped answering'
    else
      assert_output --partial 'rank 2 stopped answering'
      # Every missing rank is accounted for under "left": none "never arrived".
      refute_output --partial 'never arrived'
    fi
  done
}

@test "participants on node2 and node3 reach the host on node1 by name and by address; the barrier releases all" {
  participant node2 name0 "node1:$PORT" --n 4 --rank 0 --timeout 20s
  participant node2 addr1 "10.231.0.1:$PORT" --n 4 --rank 1 --timeout 20s
  participant node3 name2 "node1:$PORT" --n 4 --rank 2 --timeout 20s
  arrived_is 3
  # Nobody is released with one missing.
  for out in name0 addr1 name2; do alive "${PID_OF[$out]}"; done
  # The host sees them come from the other namespaces' addresses.
  run -0 ip netns exec tfb-node1 ss -Htn state established "sport = :$PORT"
  assert_output --partial "10.231.0.2:"
  assert_output --partial "10.231.0.3:"
  participant node3 addr3 "10.231.0.1:$PORT" --n 4 --rank 3 --timeout 20s
  expect_exits 0 name0 addr1 name2 addr3
  run -0 grep -c 'release x#1: 4 participants' "$HOST_LOG"
  assert_output 1
}

@test "a participant without --insecure refuses a host beyond loopback that does not authenticate (77), before sending its request" {
  NODE_ENV=()
  in_node node2
  run -77 --separate-stderr timeout 20 "${IN_NODE[@]}" "$TFB" wait --name secretname --n 2 --rank 1 \
    --addr "10.231.0.1:$PORT"
  [[ $stderr == *"the host at 10.231.0.1:$PORT does not authenticate (auth=none)"*"--insecure"* ]]
  # The host never saw the barrier's name: only HELLO went out.
  ! grep -q secretname "$HOST_LOG" || false
  NODE_ENV=(TFBARRIER_INSECURE=1)
  in_node node2
  run -0 --separate-stderr timeout 20 "${IN_NODE[@]}" "$TFB" status --addr "10.231.0.1:$PORT" --json
  [[ $output != *secretname* ]]
  # Told --insecure (flag or variable), the same participant takes the host.
  NODE_ENV=()
  participant node2 p1 "10.231.0.1:$PORT" --n 2 --rank 1 --insecure
  NODE_ENV=(TFBARRIER_INSECURE=1)
  participant node3 p2 "10.231.0.1:$PORT" --n 2 --rank 0
  expect_exits 0 p1 p2
  grep -q "arrive x#1: " "$HOST_LOG"  # arrivals are logged by name: the check above could fail
}

@test "node3's link is down before it arrives: the others are not released, their timeout names rank 2; after link up all are released" {
  ip -n tfb-node3 link set eth0 down
  # Rank 2 keeps trying to connect while its link is down.
  participant node3 r2 "node1:$PORT" --n 3 --rank 2 --connect-timeout 40s --timeout 40s
  SECONDS=0
  participant node2 r0 "node1:$PORT" --n 3 --rank 0 --timeout 3s
  participant node2 r1 "10.231.0.1:$PORT" --n 3 --rank 1 --timeout 3s
  expect_exits 124 r0 r1
  [ "$SECONDS" -ge 3 ]
  run -0 cat r0.err r1.err
  names_missing_rank2 3s never r0.err r1.err
  alive "${PID_OF[r2]}"                      # still trying
  run -1 grep 'release x' "$HOST_LOG"

  ip -n tfb-node3 link set eth0 up
  arrived_is 1 15                               # rank 2 got through
  participant node2 r0b "node1:$PORT" --n 3 --rank 0 --timeout 20s
  participant node2 r1b "10.231.0.1:$PORT" --n 3 --rank 1 --timeout 20s
  expect_exits 0 r2 r0b r1b
  run -0 grep -c 'release x#1: 3 participants' "$HOST_LOG"
  assert_output 1
}

@test "node3's link goes down while it waits: it is withdrawn, the others are not released; after link up it rejoins and all are released" {
  # Keep-alives every 1s: the host withdraws a participant silent for 3.5s.
  participant node3 r2 "node1:$PORT" --n 3 --rank 2 --keepalive 1s --connect-timeout 40s --timeout 60s
  arrived_is 1
  ip -n tfb-node3 link set eth0 down
  arrived_is 0 15                               # withdrawn as unresponsive
  run -0 grep -c 'sent nothing for' "$HOST_LOG"
  assert_output 1

  participant node2 r0 "node1:$PORT" --n 3 --rank 0 --timeout 2s
  participant node2 r1 "10.231.0.1:$PORT" --n 3 --rank 1 --timeout 2s
  expect_exits 124 r0 r1
  run -1 grep 'release x' "$HOST_LOG"

  participant node2 r0b "node1:$PORT" --n 3 --rank 0 --timeout 30s
  participant node2 r1b "10.231.0.1:$PORT" --n 3 --rank 1 --timeout 30s
  arrived_is 2
  ip -n tfb-node3 link set eth0 up
  expect_exits 0 r2 r0b r1b
  run -0 grep -c 'release x#1: 3 participants' "$HOST_LOG"
  assert_output 1
  # Last, so the rejoin above is checked even when this fails: the timeouts named rank 2
  # and said it stopped answering.
  names_missing_rank2 2s unresponsive r0.err r1.err
}
