{{/*
The chart's name, or nameOverride.
*/}}
{{- define "coordd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's full name: the release's name if it holds the chart's, else
both; fullnameOverride wins.
*/}}
{{- define "coordd.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Labels of every object; the selector's are coordd's pods' (shared mode).
*/}}
{{- define "coordd.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "coordd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: coordd
{{- end -}}

{{- define "coordd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "coordd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The application's pods' labels (sidecar mode).
*/}}
{{- define "coordd.appSelectorLabels" -}}
app.kubernetes.io/name: {{ .Values.sidecar.app.name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "coordd.sidecar" -}}
{{- if eq .Values.mode "sidecar" }}true{{ end -}}
{{- end -}}

{{/*
coordd's store: the value, or the mode's default.
*/}}
{{- define "coordd.store" -}}
{{- if .Values.store -}}
{{- .Values.store -}}
{{- else if eq .Values.mode "sidecar" -}}
memory
{{- else -}}
redis
{{- end -}}
{{- end -}}

{{/*
Whether the Deployment mounts the TLS Secret and the API keys' Secret
(shared mode only: a sidecar's gRPC is on the pod's loopback).
*/}}
{{- define "coordd.tls" -}}
{{- if and (not (include "coordd.sidecar" .)) .Values.tls.enabled }}true{{ end -}}
{{- end -}}

{{- define "coordd.apiKeysFile" -}}
{{- if and (not (include "coordd.sidecar" .)) .Values.auth.enabled .Values.auth.existingSecret }}true{{ end -}}
{{- end -}}

{{- define "coordd.redisPassword" -}}
{{- if and (eq (include "coordd.store" .) "redis") .Values.redis.existingSecret }}true{{ end -}}
{{- end -}}

{{/*
Refuses values that would deploy something broken or put a secret in the
ConfigMap; values.schema.json checks types and names.
*/}}
{{- define "coordd.validate" -}}
{{- $store := include "coordd.store" . -}}
{{- if and (eq $store "memory") (not (include "coordd.sidecar" .)) (or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1)) -}}
{{- fail "store memory keeps state in each replica's own process: a shared service on it must have one replica (replicaCount: 1, autoscaling off), or use store: redis" -}}
{{- end -}}
{{- if dig "redis" "password" "" .Values.config -}}
{{- fail "config.redis.password would put Redis's password in a ConfigMap: put it in a Secret and name it in redis.existingSecret" -}}
{{- end -}}
{{- range .Values.auth.apiKeys -}}
{{- if hasKey . "key" -}}
{{- fail "auth.apiKeys: a plain key would be in a ConfigMap: give key_sha256 (printf %s \"$KEY\" | sha256sum), or put keys in the Secret of auth.existingSecret" -}}
{{- end -}}
{{- end -}}
{{- if and (eq $store "redis") (not .Values.redis.addrs) -}}
{{- fail "redis.addrs: store redis needs Redis's addresses" -}}
{{- end -}}
{{- end -}}

{{/*
coordd.yaml: the keys the chart's values set, then config over them.
*/}}
{{- define "coordd.config" -}}
{{- $v := .Values -}}
{{- $sidecar := include "coordd.sidecar" . -}}
{{- $store := include "coordd.store" . -}}
{{- $cfg := dict "store" $store "log_format" "json" "log_level" $v.logLevel "shutdown_timeout" $v.shutdownTimeout -}}
{{- $_ := set $cfg "grpc_addr" (printf "%s:%v" (ternary "127.0.0.1" "0.0.0.0" (eq $sidecar "true")) $v.ports.grpc) -}}
{{- $_ := set $cfg "http_addr" (printf "0.0.0.0:%v" $v.ports.http) -}}
{{- if eq $store "redis" -}}
{{- $redis := dict "mode" $v.redis.mode "addrs" $v.redis.addrs -}}
{{- with $v.redis.masterName }}{{ $_ := set $redis "master_name" . }}{{ end -}}
{{- with $v.redis.username }}{{ $_ := set $redis "username" . }}{{ end -}}
{{- $_ := set $cfg "redis" $redis -}}
{{- $instances := int $v.replicaCount -}}
{{- if $sidecar }}{{ $instances = int $v.sidecar.app.replicas }}{{ else if $v.autoscaling.enabled }}{{ $instances = int $v.autoscaling.maxReplicas }}{{ end -}}
{{- $_ := set $cfg "ratelimit" (dict "expected_instances" (max $instances 1)) -}}
{{- end -}}
{{- if include "coordd.tls" . -}}
{{- $tls := dict "cert_file" "/etc/coordd-tls/tls.crt" "key_file" "/etc/coordd-tls/tls.key" -}}
{{- if $v.tls.clientCA }}{{ $_ := set $tls "client_ca_file" "/etc/coordd-tls/ca.crt" }}{{ end -}}
{{- with $v.tls.clientAuth }}{{ $_ := set $tls "client_auth" . }}{{ end -}}
{{- $_ := set $cfg "tls" $tls -}}
{{- end -}}
{{- if not $sidecar -}}
{{- $auth := dict "enabled" $v.auth.enabled -}}
{{- with $v.auth.apiKeys }}{{ $_ := set $auth "api_keys" . }}{{ end -}}
{{- with $v.auth.mtls }}{{ $_ := set $auth "mtls" . }}{{ end -}}
{{- if include "coordd.apiKeysFile" . }}{{ $_ := set $auth "api_keys_file" "/etc/coordd-auth/api-keys.yaml" }}{{ end -}}
{{- $_ := set $cfg "auth" $auth -}}
{{- end -}}
{{- toYaml (mergeOverwrite $cfg (deepCopy $v.config)) -}}
{{- end -}}

{{/*
The coordd container, as both modes run it: (dict "root" $ "sidecar" bool).
In sidecar mode it is an init container with restartPolicy Always (a native
sidecar) with a startup probe, so that the application starts once coordd
serves, and no gRPC port (gRPC is on the pod's loopback).
*/}}
{{- define "coordd.container" -}}
{{- $v := .root.Values -}}
- name: coordd
  image: "{{ $v.image.repository }}:{{ $v.image.tag | default .root.Chart.AppVersion }}"
  imagePullPolicy: {{ $v.image.pullPolicy }}
  {{- if .sidecar }}
  restartPolicy: Always
  {{- end }}
  # The image's entrypoint passes --grpc-addr and --http-addr, and flags
  # override the config file: call the binary directly.
  command: ["/usr/local/bin/coordd", "--config=/etc/coordd/coordd.yaml"]
  env:
    # GOMEMLIMIT from the memory limit, in MiB followed by six zeros: 95.4 %
    # of the limit (deploy/kubernetes/base/deployment.yaml says why).
    - name: MEMORY_LIMIT_MIB
      valueFrom:
        resourceFieldRef:
          resource: limits.memory
          divisor: 1Mi
    - name: GOMEMLIMIT
      value: "$(MEMORY_LIMIT_MIB)000000"
    {{- if include "coordd.redisPassword" .root }}
    - name: COORDD_REDIS_PASSWORD
      valueFrom:
        secretKeyRef:
          name: {{ $v.redis.existingSecret }}
          key: {{ $v.redis.existingSecretPasswordKey }}
    {{- end }}
    {{- with $v.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    {{- if not .sidecar }}
    - name: grpc
      containerPort: {{ $v.ports.grpc }}
      protocol: TCP
    {{- end }}
    - name: metrics
      containerPort: {{ $v.ports.http }}
      protocol: TCP
  {{- if .sidecar }}
  startupProbe:
    httpGet:
      path: /healthz
      port: metrics
    periodSeconds: 1
    failureThreshold: 30
  {{- end }}
  readinessProbe:
    httpGet:
      path: /healthz
      port: metrics
    periodSeconds: 5
    failureThreshold: 2
  livenessProbe:
    httpGet:
      path: /healthz
      port: metrics
    initialDelaySeconds: 5
    periodSeconds: 20
    failureThreshold: 3
  {{- if and (not .sidecar) $v.preStopSeconds }}
  lifecycle:
    preStop:
      sleep:
        seconds: {{ $v.preStopSeconds }}
  {{- end }}
  resources:
    {{- toYaml (ternary $v.sidecar.resources $v.resources .sidecar) | nindent 4 }}
  securityContext:
    {{- toYaml $v.securityContext | nindent 4 }}
  volumeMounts:
    - name: coordd-config
      mountPath: /etc/coordd
      readOnly: true
    {{- if include "coordd.tls" .root }}
    - name: tls
      mountPath: /etc/coordd-tls
      readOnly: true
    {{- end }}
    {{- if include "coordd.apiKeysFile" .root }}
    - name: api-keys
      mountPath: /etc/coordd-auth
      readOnly: true
    {{- end }}
{{- end -}}

{{/*
The volumes the coordd container mounts.
*/}}
{{- define "coordd.volumes" -}}
- name: coordd-config
  configMap:
    name: {{ include "coordd.fullname" . }}-config
{{- if include "coordd.tls" . }}
- name: tls
  secret:
    secretName: {{ .Values.tls.secretName }}
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
      {{- if .Values.tls.clientCA }}
      - key: ca.crt
        path: ca.crt
      {{- end }}
{{- end }}
{{- if include "coordd.apiKeysFile" . }}
- name: api-keys
  secret:
    secretName: {{ .Values.auth.existingSecret }}
    items:
      - key: {{ .Values.auth.existingSecretKey }}
        path: api-keys.yaml
{{- end }}
{{- end -}}

{{/*
The pod's scheduling and security settings of both modes.
*/}}
{{- define "coordd.podSettings" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
