{{/* The chart's name, and the release's full name (63 characters at most). */}}
{{- define "argus.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "argus.fullname" -}}
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

{{- define "argus.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "argus.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "argus.selectorLabels" -}}
app.kubernetes.io/name: {{ include "argus.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: coordinator
{{- end }}

{{/* The Secret that holds the database URL and the tokens. */}}
{{- define "argus.secretName" -}}
{{- default (include "argus.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* The claim that holds the artifacts. */}}
{{- define "argus.claimName" -}}
{{- default (printf "%s-artifacts" (include "argus.fullname" .)) .Values.artifacts.existingClaim }}
{{- end }}

{{/*
The secrets the coordinator is given, as "setting=key=VARIABLE" lines: a
value of the chart's own Secret that is not empty, or a key of the existing
Secret that is named.
*/}}
{{- define "argus.secretFiles" -}}
{{- $secrets := .Values.secrets }}
{{- range $setting, $variable := dict "databaseUrl" "ARGUS_DATABASE_URL_FILE" "workerToken" "ARGUS_WORKER_TOKEN_FILE" "clientToken" "ARGUS_CLIENT_TOKEN_FILE" "readToken" "ARGUS_READ_TOKEN_FILE" }}
{{- $key := index $secrets.keys $setting }}
{{- $given := ternary $key (index $secrets $setting) (not (empty $secrets.existingSecret)) }}
{{- if and $key $given }}
{{ $setting }}={{ $key }}={{ $variable }}
{{- end }}
{{- end }}
{{- end }}
