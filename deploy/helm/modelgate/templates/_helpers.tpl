{{- define "modelgate.name" -}}{{ .Chart.Name }}{{- end -}}
{{- define "modelgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}
{{- define "modelgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "modelgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "modelgate.labels" -}}
{{ include "modelgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
{{- define "modelgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}{{ default (include "modelgate.fullname" .) .Values.serviceAccount.name }}{{- else -}}{{ default "default" .Values.serviceAccount.name }}{{- end -}}
{{- end -}}
{{- define "modelgate.secretMode" -}}{{ has .Values.grpcAuth.mode (list "secret" "secret+mtls") }}{{- end -}}
{{- define "modelgate.mtlsMode" -}}{{ has .Values.grpcAuth.mode (list "mtls" "secret+mtls") }}{{- end -}}

{{/* Refusals: a chart that renders is one modelgate can run safely. */}}
{{- define "modelgate.validate" -}}
{{- $mode := .Values.grpcAuth.mode -}}
{{- if not (has $mode (list "secret" "mtls" "secret+mtls" "none")) -}}
{{- fail (printf "grpcAuth.mode must be secret, mtls, secret+mtls or none (got %q)" $mode) -}}
{{- end -}}
{{- if and (eq $mode "none") (not .Values.grpcAuth.allowNone) (not (and .Values.istio.enabled .Values.istio.meshMtls)) -}}
{{- fail "grpcAuth.mode none leaves modelgate's gRPC port (Checks, the meter's reports) open to every pod that reaches it: Envoy in another pod needs grpcAuth.mode secret or mtls (docs/security.md); set grpcAuth.allowNone only when Envoy runs in modelgate's pod, or istio.enabled with istio.meshMtls" -}}
{{- end -}}
{{- if and (eq (include "modelgate.secretMode" .) "true") (not .Values.grpcAuth.secret.existingSecret) -}}
{{- fail "grpcAuth.mode secret needs grpcAuth.secret.existingSecret: a Secret holding the gRPC port's secret (openssl rand -base64 32)" -}}
{{- end -}}
{{- if and (eq (include "modelgate.mtlsMode" .) "true") (not .Values.grpcAuth.tls.existingSecret) -}}
{{- fail "grpcAuth.mode mtls needs grpcAuth.tls.existingSecret: a Secret with tls.crt, tls.key and ca.crt (the CA of Envoy's client certificate)" -}}
{{- end -}}
{{- if not (has .Values.store.kind (list "file" "postgres")) -}}
{{- fail (printf "store.kind must be file or postgres (got %q)" .Values.store.kind) -}}
{{- end -}}
{{- if and (eq .Values.store.kind "postgres") (not .Values.store.postgres.existingSecret) -}}
{{- fail "store.kind postgres needs store.postgres.existingSecret: a Secret holding the postgres:// URL" -}}
{{- end -}}
{{- if and (eq .Values.store.kind "file") (gt (int .Values.replicaCount) 1) -}}
{{- fail (printf "replicaCount %d on the file store: each replica would keep its own balances, so a key could spend its balance %d times; run one replica, or set store.kind postgres" (int .Values.replicaCount) (int .Values.replicaCount)) -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (empty .Values.networkPolicy.grpcFrom) -}}
{{- fail "networkPolicy.enabled needs networkPolicy.grpcFrom (who may call the gRPC port: Envoy's pods); an empty list would admit every source" -}}
{{- end -}}
{{- if and .Values.envoyGateway.enabled (has $mode (list "secret" "none")) -}}
{{- fail "envoyGateway.enabled needs grpcAuth.mode mtls (or secret+mtls): Envoy Gateway's ext_authz and access-log services cannot send the shared secret, they present a client certificate (EnvoyProxy backendTLS)" -}}
{{- end -}}
{{- end -}}

{{/* The config modelgate runs: values.config with the chart's settings over it. */}}
{{- define "modelgate.config" -}}
{{- $c := deepCopy .Values.config -}}
{{- $_ := set $c "server" (dict "grpc" (printf "0.0.0.0:%d" (int .Values.ports.grpc)) "http" (printf "0.0.0.0:%d" (int .Values.ports.http))) -}}
{{- $grpc := default (dict) $c.grpc -}}
{{- if eq (include "modelgate.secretMode" .) "true" -}}
{{- $_ := set $grpc "secret" (dict "file" "/etc/modelgate/grpc-secret/secret") -}}
{{- end -}}
{{- if eq (include "modelgate.mtlsMode" .) "true" -}}
{{- $_ := set $grpc "tls" (dict "certFile" "/etc/modelgate/tls/tls.crt" "keyFile" "/etc/modelgate/tls/tls.key" "clientCaFile" "/etc/modelgate/tls/ca.crt") -}}
{{- $gw := default (dict) $c.gateway -}}
{{- if not $gw.authzTls -}}
{{- $_ := set $gw "authzTls" (dict "certFile" "/etc/envoy/modelgate-client.crt" "keyFile" "/etc/envoy/modelgate-client.key" "caFile" "/etc/envoy/modelgate-ca.crt" "serverName" (printf "%s.%s.svc" (include "modelgate.fullname" .) .Release.Namespace)) -}}
{{- end -}}
{{- $_ := set $c "gateway" $gw -}}
{{- end -}}
{{- $_ := set $c "grpc" $grpc -}}
{{- if eq .Values.store.kind "file" -}}
{{- $meter := default (dict) $c.meter -}}
{{- $_ := set $meter "stateFile" "/var/lib/modelgate/meter.state.json" -}}
{{- $_ := set $c "meter" $meter -}}
{{- $_ := set $c "store" "file" -}}
{{- else -}}
{{- $_ := unset $c "store" -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{- define "modelgate.drainSeconds" -}}
{{- $m := default (dict) .Values.config.meter -}}{{ hasKey $m "drainSeconds" | ternary (int $m.drainSeconds) 25 }}
{{- end -}}
{{- define "modelgate.authzTimeoutSeconds" -}}
{{- $g := default (dict) .Values.config.gateway -}}{{ $ms := hasKey $g "authzTimeoutMs" | ternary (int $g.authzTimeoutMs) 1000 }}{{ div (add $ms 999) 1000 }}
{{- end -}}
{{- define "modelgate.gracePeriod" -}}
{{ add (int .Values.preStopSeconds) (int (include "modelgate.drainSeconds" .)) (int (include "modelgate.authzTimeoutSeconds" .)) (int .Values.graceMarginSeconds) }}
{{- end -}}
