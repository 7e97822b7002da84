{{/* Names are cut at 63 characters: Service and label values are DNS labels. */}}
{{- define "gov.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gov.fullname" -}}
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

{{/* The injector's objects: "-injector" must fit, so the base is cut shorter. */}}
{{- define "gov.injectorName" -}}
{{- printf "%s-injector" (include "gov.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}

{{- define "gov.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; pass a dict with "ctx" (the root context) and "component". */}}
{{- define "gov.labels" -}}
helm.sh/chart: {{ include "gov.chart" .ctx }}
{{ include "gov.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: gov-gateway
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "gov.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gov.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gov.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "gov.gatewayServiceAccountName" -}}
{{- if .Values.gateway.serviceAccount.create }}
{{- default (include "gov.fullname" .) .Values.gateway.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.gateway.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gov.injectorServiceAccountName" -}}
{{- if .Values.injector.serviceAccount.create }}
{{- default (include "gov.injectorName" .) .Values.injector.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.injector.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The injector's serving certificate and its Secret (tls.mode helm and certManager). */}}
{{- define "gov.injectorTlsSecret" -}}
{{- if eq .Values.injector.tls.mode "secret" }}
{{- .Values.injector.tls.secret.name }}
{{- else }}
{{- printf "%s-tls" (include "gov.injectorName" .) }}
{{- end }}
{{- end }}

{{/* Namespaces neither webhook selects: kube-system, the release's own (so a failing injector can always be
re-created), and the configured ones. */}}
{{- define "gov.excludedNamespaces" -}}
{{- $ns := list "kube-system" .Release.Namespace }}
{{- range .Values.injector.excludeNamespaces }}
{{- $ns = append $ns . }}
{{- end }}
{{- toJson ($ns | uniq) }}
{{- end }}

{{/* podAntiAffinity from a mode: soft (preferred) or hard (required) over nodes; pass ctx, component, mode. */}}
{{- define "gov.podAntiAffinity" -}}
{{- if eq .mode "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "gov.selectorLabels" . | nindent 10 }}
{{- else if eq .mode "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "gov.selectorLabels" . | nindent 12 }}
{{- end }}
{{- end }}
