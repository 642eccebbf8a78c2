{{/* The chart's name, or nameOverride. */}}
{{- define "idemgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: fullnameOverride, or release-name (the release's name alone when it already holds the chart's). */}}
{{- define "idemgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "idemgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "idemgate.labels" -}}
helm.sh/chart: {{ include "idemgate.chart" . }}
{{ include "idemgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: idemgate
{{- end }}

{{/* The labels selectors match (a component label is added per workload). */}}
{{- define "idemgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "idemgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "idemgate.image" -}}
{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* A secretKeyRef from {name, key}. */}}
{{- define "idemgate.secretRef" -}}
valueFrom:
  secretKeyRef:
    name: {{ required (printf "%s.name is required" .path) .ref.name }}
    key: {{ required (printf "%s.key is required" .path) .ref.key }}
{{- end }}

{{/*
The database URL. Through PgBouncer with a query exec mode, the URL from the Secret is read into
a variable of the chart's own and IDEMGATE_DATABASE_URL is built from it with Kubernetes'
dependent variables, $(NAME), adding default_query_exec_mode.
*/}}
{{- define "idemgate.databaseEnv" -}}
{{- $pgb := .Values.pgbouncer }}
{{- if and $pgb.enabled $pgb.queryExecMode }}
- name: HELM_IDEMGATE_DATABASE_URL
  {{- include "idemgate.secretRef" (dict "ref" .Values.secrets.databaseUrl "path" "secrets.databaseUrl") | nindent 2 }}
- name: IDEMGATE_DATABASE_URL
  value: {{ printf "$(HELM_IDEMGATE_DATABASE_URL)%sdefault_query_exec_mode=%s" (ternary "&" "?" $pgb.databaseUrlHasQuery) $pgb.queryExecMode | quote }}
{{- else }}
- name: IDEMGATE_DATABASE_URL
  {{- include "idemgate.secretRef" (dict "ref" .Values.secrets.databaseUrl "path" "secrets.databaseUrl") | nindent 2 }}
{{- end }}
{{- if and $pgb.enabled $pgb.listenUrl.name }}
- name: IDEMGATE_DATABASE_LISTEN_URL
  {{- include "idemgate.secretRef" (dict "ref" $pgb.listenUrl "path" "pgbouncer.listenUrl") | nindent 2 }}
{{- end }}
{{- end }}

{{/* The environment of serve and worker: the database, the keys, the tools file, the log level. */}}
{{- define "idemgate.env" -}}
{{ include "idemgate.databaseEnv" . }}
- name: IDEMGATE_SESSION_KEY
  {{- include "idemgate.secretRef" (dict "ref" .Values.secrets.sessionKey "path" "secrets.sessionKey") | nindent 2 }}
- name: IDEMGATE_DATA_KEY
  {{- include "idemgate.secretRef" (dict "ref" .Values.secrets.dataKey "path" "secrets.dataKey") | nindent 2 }}
{{- if .Values.secrets.dataKeysOld.name }}
- name: IDEMGATE_DATA_KEYS_OLD
  {{- include "idemgate.secretRef" (dict "ref" .Values.secrets.dataKeysOld "path" "secrets.dataKeysOld") | nindent 2 }}
{{- end }}
{{- if .Values.tools.configMap }}
- name: IDEMGATE_TOOLS
  value: /etc/idemgate/tools/{{ .Values.tools.key }}
{{- end }}
{{- if .Values.logLevel }}
- name: IDEMGATE_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- end }}
{{- if .Values.trustProxy }}
{{- if not .Values.networkPolicy.enabled }}
{{- fail "trustProxy needs networkPolicy.enabled: X-Forwarded-For is believed only where nothing but the ingress can reach the pods (docs/OPERATIONS.md)" }}
{{- end }}
- name: IDEMGATE_TRUST_PROXY
  value: {{ .Values.trustProxy | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volumes every pod has: /tmp (the root filesystem is read-only) and the tools file. */}}
{{- define "idemgate.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- if .Values.tools.configMap }}
- name: tools
  configMap:
    name: {{ .Values.tools.configMap }}
{{- end }}
{{- end }}

{{- define "idemgate.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.tools.configMap }}
- name: tools
  mountPath: /etc/idemgate/tools
  readOnly: true
{{- end }}
{{- end }}

{{/* What every pod's spec starts with. */}}
{{- define "idemgate.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Scheduling: affinity as given; each topology spread constraint without a labelSelector gets the
component's own (so that serve's replicas spread apart from each other).
*/}}
{{- define "idemgate.scheduling" -}}
{{- $root := .root }}
{{- with $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range . }}
  - {{ toYaml (ternary . (merge (dict "labelSelector" (dict "matchLabels" (merge (dict "app.kubernetes.io/component" $.component) (fromYaml (include "idemgate.selectorLabels" $root))))) .) (hasKey . "labelSelector")) | nindent 4 | trim }}
{{- end }}
{{- end }}
{{- end }}
