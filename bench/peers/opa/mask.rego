# Decision-log masking (OPA's system.log.mask): only used when decision logs are on
# (start-opa.sh --decision-logs). Keys and prompts never reach a log line, as in modelgate.
package system.log

mask contains "/input/attributes/request/http/headers/authorization"

mask contains "/input/attributes/request/http/headers/x-api-key"

mask contains "/input/attributes/request/http/headers/x-vendor-api-key"

mask contains "/input/attributes/request/http/headers/x-goog-api-key"

mask contains "/input/attributes/request/http/body"

mask contains "/input/attributes/request/http/rawBody"

mask contains "/input/parsed_body"
