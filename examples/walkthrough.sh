#!/usr/bin/env bash
# A user's first ten minutes, against the running quick start
# (./caddy run --config Caddyfile.example in another terminal):
# create a user through the operator endpoints, add a test card, subscribe to
# the block that is open now, create a key, and call both inference endpoints.
#
#   examples/walkthrough.sh [base URL] [admin URL]
set -euo pipefail

BASE="${1:-http://localhost:8080}"
ADMIN="${2:-http://localhost:2019}"
POOL="${POOL:-llama-70b}"
MODEL="${MODEL:-meta-llama/Llama-3.3-70B-Instruct}"

# json FIELD: read one field (a dotted path) of the JSON on stdin.
json() {
	if command -v jq >/dev/null 2>&1; then
		jq -er ".$1"
	else
		python3 -c 'import json,sys
v=json.load(sys.stdin)
for p in sys.argv[1].split("."): v=v[int(p)] if isinstance(v,list) else v[p]
print(v)' "$1"
	fi
}

# call METHOD URL [BODY] [curl args...]: prints the body, fails loudly on HTTP >= 400.
call() {
	local method=$1 url=$2 body=${3:-}
	shift 3 || shift $#
	local out status
	out=$(mktemp)
	status=$(curl -sS -o "$out" -w '%{http_code}' -X "$method" "$url" \
		-H 'Content-Type: application/json' ${body:+--data "$body"} "$@")
	if [ "$status" -ge 400 ]; then
		echo "!! $method $url -> HTTP $status" >&2
		cat "$out" >&2; echo >&2
		rm -f "$out"
		exit 1
	fi
	cat "$out"
	rm -f "$out"
}

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

hour=$(date -u +%H); hour=$((10#$hour))
if [ "$hour" -lt 8 ]; then block=asia; elif [ "$hour" -lt 16 ]; then block=europe; else block=americas; fi

step "1. The operator creates a user (admin API)"
email="walkthrough-$(date +%s)@example.com"
user=$(call POST "$ADMIN/timeblock/users" "{\"email\":\"$email\",\"name\":\"Walkthrough\"}")
echo "$user"
TOKEN=$(echo "$user" | json data.sessionToken)
AUTH=(-H "Authorization: Bearer $TOKEN")

step "2. The user saves a test card"
call POST "$BASE/api/billing/setup-intent" '{"paymentMethod":"pm_card_visa"}' "${AUTH[@]}"; echo

step "3. Pools on sale, and the purchase terms"
call GET "$BASE/api/pools" "" "${AUTH[@]}" | head -c 600; echo " ..."
terms=$(call GET "$BASE/api/pools/disclosure" "")
echo "$terms"
VERSION=$(echo "$terms" | json data.version)

step "4. Subscribe to the $block block of $POOL (open now: UTC hour $hour)"
sub=$(call POST "$BASE/api/pools/$POOL/subscribe" \
	"{\"blocks\":[\"$block\"],\"quantity\":1,\"billingCycle\":\"month\",\"acknowledgment\":{\"version\":\"$VERSION\"}}" "${AUTH[@]}")
echo "$sub"
SUB=$(echo "$sub" | json data.id)

step "5. Create the subscription's consumption key"
key=$(call POST "$BASE/api/keys/subscription" "{\"subscriptionId\":\"$SUB\",\"name\":\"walkthrough\"}" "${AUTH[@]}")
KEY=$(echo "$key" | json data.apiKey)
echo "key ${KEY:0:12}... created"

step "6. Chat completions (Authorization: Bearer)"
call POST "$BASE/v1/chat/completions" \
	"{\"model\":\"$MODEL\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"Say hello\"}]}" \
	-H "Authorization: Bearer $KEY"
echo

step "7. Messages endpoint, streaming (x-api-key)"
call POST "$BASE/compat/v1/messages" \
	"{\"model\":\"$MODEL\",\"max_tokens\":64,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Say hello\"}]}" \
	-H "x-api-key: $KEY" -H 'compat-version: 2023-06-01'
echo

step "Done: user $email, subscription $SUB"
