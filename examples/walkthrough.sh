#!/usr/bin/env bash
# A user's first ten minutes, against the running quick start
# (./caddy run --config Caddyfile.example in another terminal):
# sign in (with CADDY_LOG naming the file Caddy logs to, through an e-mail
# sign-in link read from it, as the account page does; else through the
# operator endpoints), add a test card, subscribe to
# the block that is open now, create a key, call both inference endpoints,
# list the key's models, call the Responses API and stream from the Gemini
# API. It ends with the key and ready-to-paste settings for the OpenAI,
# Anthropic and Google Gen AI SDKs, Claude Code, Codex CLI and Gemini CLI,
# and exits non-zero as soon as a step fails. docs/api.md describes every
# endpoint it calls.
#
#   examples/walkthrough.sh [base URL] [admin URL]
#   POOL=qwen3-32b MODEL=Qwen/Qwen3-32B examples/walkthrough.sh
#   ./caddy run --config Caddyfile.example 2>caddy.log &  CADDY_LOG=caddy.log examples/walkthrough.sh
set -euo pipefail

BASE="${1:-http://localhost:8080}"
ADMIN="${2:-http://localhost:2019}"
POOL="${POOL:-llama-70b}"
MODEL="${MODEL:-meta-llama/Llama-3.3-70B-Instruct}"

# json FIELD: read one field (a dotted path, array indexes as numbers:
# choices.0.message) of the JSON on stdin; fails when it is missing or null.
json() {
	if command -v jq >/dev/null 2>&1; then
		jq -er --arg p "$1" 'getpath($p | split(".") | map(tonumber? // .))'
	else
		python3 -c 'import json,sys
v=json.load(sys.stdin)
for p in sys.argv[1].split("."): v=v[int(p)] if isinstance(v,list) else v[p]
if v is None: sys.exit(1)
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

email="walkthrough-$(date +%s)@example.com"
if [ -n "${CADDY_LOG:-}" ]; then
	step "1. The user signs in with an e-mail link (the quick start logs it instead of mailing it)"
	call POST "$BASE/api/auth/email" "{\"email\":\"$email\"}"; echo
	link=""
	for _ in $(seq 1 50); do
		link=$(grep -o "\"email\":\"$email\",\"link\":\"[^\"]*" "$CADDY_LOG" | sed 's/.*"link":"//' | tail -n 1 || true)
		[ -n "$link" ] && break
		sleep 0.1
	done
	[ -n "$link" ] || { echo "!! no sign-in link for $email in $CADDY_LOG" >&2; exit 1; }
	echo "link: ${link%%token=*}token=..."
	signed=$(call POST "$BASE/api/auth/verify" "{\"token\":\"${link##*token=}\"}")
	TOKEN=$(echo "$signed" | json data.sessionToken)
	echo "signed in as $(echo "$signed" | json data.user.email)"
else
	step "1. The operator creates a user (admin API)"
	user=$(call POST "$ADMIN/timeblock/users" "{\"email\":\"$email\",\"name\":\"Walkthrough\"}")
	echo "$user"
	TOKEN=$(echo "$user" | json data.sessionToken)
fi
AUTH=(-H "Authorization: Bearer $TOKEN")

step "2. The user saves a test card"
call POST "$BASE/api/billing/setup-intent" '{"paymentMethod":"pm_card_visa"}' "${AUTH[@]}"; echo

step "3. Pools on sale, and the purchase terms"
pools=$(call GET "$BASE/api/pools" "" "${AUTH[@]}")
echo "${pools:0:600} ..."
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
echo "key ${KEY:0:12}... created (the whole key is printed at the end)"

step "6. Chat completions (Authorization: Bearer)"
chat=$(call POST "$BASE/v1/chat/completions" \
	"{\"model\":\"$MODEL\",\"max_tokens\":64,\"messages\":[{\"role\":\"user\",\"content\":\"Say hello\"}]}" \
	-H "Authorization: Bearer $KEY")
echo "$chat"
echo "$chat" | json choices.0.message.content >/dev/null ||
	{ echo "!! the chat completion has no message content" >&2; exit 1; }

step "7. Messages endpoint, streaming (x-api-key)"
stream=$(call POST "$BASE/compat/v1/messages" \
	"{\"model\":\"$MODEL\",\"max_tokens\":64,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"Say hello\"}]}" \
	-H "x-api-key: $KEY" -H 'anthropic-version: 2023-06-01')
echo "$stream"
case "$stream" in
*"event: message_stop"*) ;;
*) echo "!! the message stream did not end with message_stop" >&2; exit 1 ;;
esac

step "8. The models this key holds (GET /v1/models)"
models=$(call GET "$BASE/v1/models" "" -H "Authorization: Bearer $KEY")
echo "$models"
case "$models" in
*"\"id\":\"$MODEL\""*) ;;
*) echo "!! the model list does not name $MODEL" >&2; exit 1 ;;
esac

step "9. Responses API, as Codex CLI calls it (POST /v1/responses)"
resp=$(call POST "$BASE/v1/responses" \
	"{\"model\":\"$MODEL\",\"max_output_tokens\":64,\"input\":\"Say hello\"}" \
	-H "Authorization: Bearer $KEY")
echo "$resp"
echo "$resp" | json output.0.content.0.text >/dev/null ||
	{ echo "!! the response has no output text" >&2; exit 1; }

step "10. Gemini API, streaming, as Gemini CLI calls it (x-goog-api-key)"
gem=$(call POST "$BASE/gemini/v1beta/models/$MODEL:streamGenerateContent?alt=sse" \
	'{"contents":[{"role":"user","parts":[{"text":"Say hello"}]}],"generationConfig":{"maxOutputTokens":64}}' \
	-H "x-goog-api-key: $KEY")
echo "$gem"
case "$gem" in
*'"finishReason":'*) ;;
*) echo "!! the Gemini stream did not end with a finishReason" >&2; exit 1 ;;
esac

step "Done: user $email, subscription $SUB"
cat <<EOF

Your key (keep it secret; GET $BASE/api/keys lists it again):

  $KEY

OpenAI SDK (Python; chat completions, responses, models), base URL $BASE/v1:

  from openai import OpenAI
  client = OpenAI(base_url="$BASE/v1", api_key="$KEY")
  print(client.chat.completions.create(model="$MODEL",
      messages=[{"role": "user", "content": "Say hello"}]).choices[0].message.content)

Anthropic SDK (Python), base URL $BASE/compat:

  from anthropic import Anthropic
  client = Anthropic(base_url="$BASE/compat", api_key="$KEY")
  print(client.messages.create(model="$MODEL", max_tokens=256,
      messages=[{"role": "user", "content": "Say hello"}]).content[-1].text)

Claude Code:

  export ANTHROPIC_BASE_URL=$BASE/compat
  export ANTHROPIC_API_KEY=$KEY
  export ANTHROPIC_DEFAULT_HAIKU_MODEL=$MODEL  # its small background requests use your pool too
  claude --model $MODEL

Codex CLI: put this in ~/.codex/config.toml

  model = "$MODEL"
  model_provider = "timeblock"

  [model_providers.timeblock]
  name = "Timeblock"
  base_url = "$BASE/v1"
  env_key = "TIMEBLOCK_API_KEY"
  wire_api = "responses"

then run:

  export TIMEBLOCK_API_KEY=$KEY
  codex exec --skip-git-repo-check "Say hello"   # the flag only matters outside a git repository

Gemini CLI: put this in ~/.gemini/settings.json (it tells the CLI the key is an API key)

  {"security": {"auth": {"selectedType": "gemini-api-key"}}}

then run:

  export GOOGLE_GEMINI_BASE_URL=$BASE/gemini
  export GEMINI_API_KEY=$KEY
  gemini --model $MODEL

Google Gen AI SDK (Python), base URL $BASE/gemini:

  from google import genai
  client = genai.Client(api_key="$KEY", http_options={"base_url": "$BASE/gemini"})
  print(client.models.generate_content(model="$MODEL", contents="Say hello").text)

The key admits requests in the hours of your subscription ($block block, UTC); docs/api.md describes the API.
The same account in a browser: open $BASE/account/ and sign in with $email.
EOF
