"""LiteLLM's own spend-tracking callback, registered by the litellm-budget setup's config
(litellm_settings.callbacks: spend_tracking.proxy_db_logger; bench/e2e/setups.ts).

The instance is LiteLLM's `ProxyDBLogger` (litellm/proxy/hooks/proxy_track_cost_callback.py),
unchanged: on each success it takes the response_cost LiteLLM computed from its model cost map and
the upstream's usage, reconciles the request's budget reservation and increments the key's spend
counter (`increment_spend_counters` in litellm/proxy/proxy_server.py, an in-memory DualCache without
Redis). LiteLLM registers this same callback itself, in `proxy_server.cost_tracking()`, but only when
a database is connected; its database is PostgreSQL behind Prisma, which cannot run here
(../README.md), so the config registers it. Its database writes find no client and do nothing.
"""
from litellm.proxy.hooks.proxy_track_cost_callback import ProxyDBLogger

proxy_db_logger = ProxyDBLogger()
