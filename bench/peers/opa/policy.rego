# modelgate's decision, written for OPA-Envoy (opa-envoy-plugin) as a benchmark peer.
#
# Decision path: envoy/authz/allow (plugin default), an object result as the OPA-Envoy docs
# describe: allowed, headers, request_headers_to_remove, body, http_status.
# Data: data.modelgate.keys is a map keyed by the key's SHA-256 hex and data.modelgate.groups a
# map keyed by group name, each group's models a map keyed by model name: every lookup is one
# index, nothing iterates over keys, groups or models (OPA policy-performance guidance).
# Checks run in modelgate's order (route, key 401s, group, body/model 400/403, balance); the first
# failing check names the reason, as modelgate's `x-modelgate-reason` does.
package envoy.authz

http_req := input.attributes.request.http

req_headers := http_req.headers

# ---------------------------------------------------------------- route
# input.parsed_path is the percent-decoded path split on "/", built by the plugin.

# The alternate prefix (modelgate routes.altPrefix: /alt) is stripped; everything else is equal.
segs := array.slice(input.parsed_path, 1, count(input.parsed_path)) if {
	input.parsed_path[0] == "alt"
} else := input.parsed_path

alt if input.parsed_path[0] == "alt"

# Keyed by the whole path as an array: one object lookup, no string building.
v1_styles := {
	["v1", "chat", "completions"]: "chat",
	["v1", "responses"]: "responses",
	["v1", "embeddings"]: "embeddings",
	["v1", "messages"]: "messages",
	["v1", "messages", "count_tokens"]: "messages",
}

generative_methods := {"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"}

# /v1/...: style from the fixed table, model from the body.
route := {"style": style, "family": family, "keys": "bearer"} if {
	style := v1_styles[segs]
	family := v1_family(style)
}

# /v1beta/models/{model}:{method}: style generative, model from the path.
route := {"style": "generative", "family": "gemini", "keys": keys, "model": model} if {
	count(segs) == 3
	segs[0] == "v1beta"
	segs[1] == "models"
	parts := split(segs[2], ":")
	count(parts) == 2
	generative_methods[parts[1]]
	model := parts[0]
	model != ""
	keys := vendor_key_source
}

vendor_key_source := "both" if {
	alt
} else := "vendor"

v1_family(style) := "anthropic" if {
	style == "messages"
} else := "anthropic" if {
	req_headers["anthropic-version"]
} else := "openai"

family := route.family if {
	route
} else := "gemini" if {
	segs[0] == "v1beta"
} else := "openai"

# ---------------------------------------------------------------- key

# "Authorization: Bearer <key>" (scheme case-insensitive, as RFC 6750 allows).
bearer_token := k if {
	auth := req_headers.authorization
	lower(substring(auth, 0, 7)) == "bearer "
	k := trim_space(substring(auth, 7, -1))
}

# First non-empty key in modelgate's header order: routes.bearerHeaders then routes.vendorHeaders.
api_key := k if {
	route.keys != "vendor"
	k := bearer_token
	k != ""
} else := k if {
	route.keys != "vendor"
	k := req_headers["x-api-key"]
	k != ""
} else := k if {
	route.keys != "bearer"
	k := req_headers["x-vendor-api-key"]
	k != ""
} else := k if {
	route.keys != "bearer"
	k := req_headers["x-goog-api-key"]
	k != ""
}

authorization_malformed if {
	route.keys != "vendor"
	req_headers.authorization
	not bearer_token
}

query_key_params := ["key", "api_key", "apikey", "api-key", "access_token", "x-api-key", "x-goog-api-key", "x-vendor-api-key"]

key_in_url if {
	some p in query_key_params
	input.parsed_query[p]
}

# The one key lookup: O(1) by hash.
key := data.modelgate.keys[crypto.sha256(api_key)]

key_expired if {
	key.expires_at_ns != null
	key.expires_at_ns <= time.now_ns()
}

group := data.modelgate.groups[key.group]

# ---------------------------------------------------------------- model

content_encoded if {
	enc := req_headers["content-encoding"]
	lower(enc) != "identity"
}

body_object if is_object(input.parsed_body)

model := route.model if {
	route.model
} else := m if {
	m := input.parsed_body.model
	is_string(m)
	m != ""
}

model_entry := group.models[model]

wrong_protocol if {
	model_entry.protocols != null
	not model_entry.protocols[route.style]
}

balance_insufficient if {
	key.balance != null
	key.balance <= 0
}

# ---------------------------------------------------------------- decision (first failing check)

reason := "path_unknown" if {
	not route
} else := "method_not_allowed" if {
	http_req.method != "POST"
} else := "key_in_url" if {
	key_in_url
} else := "key_malformed" if {
	not api_key
	authorization_malformed
} else := "key_missing" if {
	not api_key
} else := "key_unknown" if {
	not key
} else := "key_disabled" if {
	key.disabled
} else := "key_expired" if {
	key_expired
} else := "group_unavailable" if {
	not group.available
} else := "body_invalid" if {
	not route.model
	content_encoded
} else := "body_too_large" if {
	not route.model
	input.truncated_body
} else := "body_invalid" if {
	not route.model
	not body_object
} else := "model_missing" if {
	not model
} else := "model_not_in_group" if {
	not model_entry
} else := "model_wrong_protocol" if {
	wrong_protocol
} else := "model_unavailable" if {
	not model_entry.available
} else := "balance_insufficient" if {
	balance_insufficient
} else := "allowed"

status := {
	"path_unknown": 404,
	"method_not_allowed": 405,
	"key_in_url": 401,
	"key_malformed": 401,
	"key_missing": 401,
	"key_unknown": 401,
	"key_disabled": 401,
	"key_expired": 401,
	"group_unavailable": 403,
	"body_invalid": 400,
	"body_too_large": 413,
	"model_missing": 400,
	"model_not_in_group": 403,
	"model_wrong_protocol": 403,
	"model_unavailable": 403,
	"balance_insufficient": 403,
}

hint := {
	"path_unknown": "no endpoint has this path",
	"method_not_allowed": "this endpoint takes POST",
	"key_in_url": "never send a key in the URL: send it in a header",
	"key_malformed": "send Authorization: Bearer <key>",
	"key_missing": "no key in the headers this endpoint reads",
	"key_unknown": "no key matches",
	"key_disabled": "the key is disabled",
	"key_expired": "the key has expired",
	"group_unavailable": "the key's group is unavailable",
	"body_invalid": "the body is not a usable JSON object",
	"body_too_large": "the request body is larger than the gateway accepts",
	"model_missing": "the body has no non-empty string \"model\"",
	"model_not_in_group": "the key's group does not include this model",
	"model_wrong_protocol": "the model is not served on this endpoint",
	"model_unavailable": "the model is unavailable right now",
	"balance_insufficient": "the key's balance is used up",
}

openai_type := {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "invalid_request_error", 405: "invalid_request_error", 413: "invalid_request_error"}

anthropic_type := {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 405: "invalid_request_error", 413: "request_too_large"}

gemini_status := {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 405: "UNIMPLEMENTED", 413: "INVALID_ARGUMENT"}

# Denial bodies in the shape the client's SDK parses (as modelgate's error-body.ts).
error_body := {"type": "error", "error": {"type": anthropic_type[code], "message": msg}} if {
	family == "anthropic"
	code := status[reason]
	msg := sprintf("%s [modelgate: %s]", [hint[reason], reason])
} else := {"error": {"code": code, "message": msg, "status": gemini_status[code]}} if {
	family == "gemini"
	code := status[reason]
	msg := sprintf("%s [modelgate: %s]", [hint[reason], reason])
} else := {"error": {"message": msg, "type": openai_type[code], "param": null, "code": reason}} if {
	code := status[reason]
	msg := sprintf("%s [modelgate: %s]", [hint[reason], reason])
}

deny_headers := object.union(
	{"content-type": "application/json", "x-modelgate-reason": reason},
	{"www-authenticate": "Bearer realm=\"modelgate\""},
) if {
	status[reason] == 401
} else := {"content-type": "application/json", "x-modelgate-reason": reason}

# Every header that can carry a client key, plus modelgate's own denial headers.
strip_headers := ["authorization", "x-api-key", "x-vendor-api-key", "x-goog-api-key", "x-modelgate-reason", "x-modelgate-hint"]

# ---------------------------------------------------------------- the result object

allow := {
	"allowed": true,
	"headers": {"x-modelgate-key-id": key.id, "x-modelgate-group": key.group, "x-modelgate-model": model},
	"request_headers_to_remove": strip_headers,
} if {
	reason == "allowed"
} else := {
	"allowed": false,
	"http_status": status[reason],
	"headers": deny_headers,
	"body": json.marshal(error_body),
}
