# ports.sh — the port a server announced: gdbserver's "Listening on port N", or hwarb's
# "listening on port N", on the standard error the test saved.
# shellcheck shell=bash

listening_port() {  # listening_port ERRFILE [PID]: prints N once ERRFILE says it (waiting up to
  # 30 s; nothing when it never does, or when server PID ends first)
  local file=$1 pid=${2:-} port=
  for _ in $(seq 600); do
    port=$(sed -n 's/.*[Ll]istening on port \([0-9]*\).*/\1/p' "$file" | head -1)
    [[ -n $port ]] && break
    [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null && break
    sleep 0.05
  done
  echo "$port"
}
