#!/usr/bin/env bash
# Starts SeaweedFS (`weed server ... -s3`, built by scripts/install-seaweedfs.sh)
# on 127.0.0.1 with free ports and a fresh, empty store in DIR/data, waits
# until its S3 API accepts a signed write, and prints the S3 endpoint on the
# last line (about 5-10 s). A no-op (it prints the endpoint again) when the
# server started from DIR is still running and answers.
#
#   bash scripts/start-seaweedfs.sh [DIR]    # default DIR: ~/.cache/sluice/seaweedfs
#   bash scripts/stop-seaweedfs.sh [DIR]
#
# DIR/env holds what a test needs, for `. DIR/env`: SLUICE_S3_ENDPOINT and
# the test identity's keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; made
# up once per DIR, they protect nothing but make every request signed, so
# a wrong key is refused as by a real store). DIR/weed.log is the server's
# log, DIR/weed.pid its process. `make test-s3` uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/seaweedfs}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

signed() { # method url [curl args...]: a SigV4-signed request with the test keys
	local m="$1" u="$2"
	shift 2
	curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X "$m" \
		--aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@" "$u" || true
}

# Already running?
if [ -f "$dir/weed.pid" ] && [ -f "$dir/env" ]; then
	pid="$(cat "$dir/weed.pid")"
	# shellcheck disable=SC1091
	. "$dir/env"
	if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-dir=$dir/data" &&
		[ "$(signed GET "$SLUICE_S3_ENDPOINT/")" = 200 ]; then
		echo "SeaweedFS already running from $dir (pid $pid)" >&2
		echo "$SLUICE_S3_ENDPOINT"
		exit 0
	fi
fi

# One that is running but does not answer is stopped first.
bash scripts/stop-seaweedfs.sh "$dir"

weed="${SLUICE_WEED:-}"
if [ -z "$weed" ] || [ ! -x "$weed" ]; then
	weed="$(bash scripts/install-seaweedfs.sh | tail -1)"
fi

# The test identity: made once per DIR.
if [ ! -f "$dir/s3.json" ]; then
	key="sluice-test-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	secret="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	cat >"$dir/s3.json.tmp" <<JSON
{"identities": [{"name": "sluice-test",
  "credentials": [{"accessKey": "$key", "secretKey": "$secret"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
JSON
	mv "$dir/s3.json.tmp" "$dir/s3.json"
fi
AWS_ACCESS_KEY_ID="$(sed -n 's/.*"accessKey": "\([^"]*\)".*/\1/p' "$dir/s3.json")"
AWS_SECRET_ACCESS_KEY="$(sed -n 's/.*"secretKey": "\([^"]*\)".*/\1/p' "$dir/s3.json")"

# weed also listens on each port + 10000 (gRPC): both must be free. Ports
# are drawn from 10000-21999 so that port + 10000 stays below the kernel's
# ephemeral range (32768-60999 here): an outgoing connection's local port
# cannot take one between the check and weed's bind. A start that still
# loses a port (weed exits at once, "failed to listen") is retried on new
# ports.
eph_lo="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
free_port() {
	local p
	for _ in $(seq 200); do
		p=$((10000 + RANDOM % 12000))
		if [ $((p + 10000)) -lt "$eph_lo" ] && ! grep -qx "$p" <<<"$used" && ! grep -qx "$((p + 10000))" <<<"$used" && [[ "$taken" != *" $p "* ]]; then
			taken="$taken$p "
			echo "$p"
			return
		fi
	done
	echo "start-seaweedfs: no free port pair found" >&2
	exit 1
}
# (curl signs the body only when given its hash.)
probe_sha="$(printf ready | sha256sum | cut -d' ' -f1)"
for attempt in 1 2 3; do
	# Every socket in any state holds its port, not only listeners.
	used="$(ss -Htan | awk '{print $4}' | sed 's/.*://' | sort -u)"
	taken=" "
	master="$(free_port)" volume="$(free_port)" filer="$(free_port)" s3="$(free_port)"
	endpoint="http://127.0.0.1:$s3"
	# A fresh store at every start: weed's master keeps its peers' addresses
	# in its state, so data from a run on other ports would not take writes.
	rm -rf "$dir/data"
	mkdir -p "$dir/data"
	echo "starting SeaweedFS in $dir: S3 on $endpoint (master $master, volume $volume, filer $filer)" >&2
	setsid "$weed" server -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
		-master.port="$master" -master.volumeSizeLimitMB=64 \
		-volume.port="$volume" -volume.max=200 \
		-filer -filer.port="$filer" \
		-s3 -s3.port="$s3" -s3.config="$dir/s3.json" \
		</dev/null >"$dir/weed.log" 2>&1 &
	pid=$!
	echo "$pid" >"$dir/weed.pid"
	cat >"$dir/env" <<ENV
SLUICE_S3_ENDPOINT=$endpoint
AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID
AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
SLUICE_WEED_PID=$pid
export SLUICE_S3_ENDPOINT AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
ENV

	# Ready when a signed write lands (the volume server has registered with
	# the master): a bucket of its own, then one small object in it.
	deadline=$((SECONDS + 90))
	ready=
	until case "$(signed PUT "$endpoint/sluice-ready")" in 200 | 409) true ;; *) false ;; esac &&
		[ "$(signed PUT "$endpoint/sluice-ready/probe" -H "x-amz-content-sha256: $probe_sha" --data-binary ready)" = 200 ]; do
		if ! kill -0 "$pid" 2>/dev/null; then
			if [ "$attempt" -lt 3 ] && grep -q "failed to listen\|address already in use" "$dir/weed.log"; then
				echo "start-seaweedfs: weed lost a port ($(grep -m1 -o 'failed to listen[^:]*' "$dir/weed.log" || echo 'address in use')); trying other ports" >&2
				bash scripts/stop-seaweedfs.sh "$dir"
				continue 2
			fi
			echo "start-seaweedfs: weed exited; the end of $dir/weed.log:" >&2
			grep -v '^ *$' "$dir/weed.log" | tail -20 | cut -c1-400 >&2
			exit 1
		fi
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "start-seaweedfs: S3 on $endpoint did not accept a write within 90 s; the end of $dir/weed.log:" >&2
			grep -v '^ *$' "$dir/weed.log" | tail -20 | cut -c1-400 >&2
			bash scripts/stop-seaweedfs.sh "$dir"
			exit 1
		fi
		sleep 0.5
	done
	ready=1
	break
done
if [ -z "$ready" ]; then
	echo "start-seaweedfs: no start succeeded" >&2
	exit 1
fi
echo "SeaweedFS ready in $dir (pid $pid)" >&2
echo "$endpoint"
