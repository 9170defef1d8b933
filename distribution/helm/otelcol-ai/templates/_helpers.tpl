{{/* The chart's name. */}}
{{- define "otelcol-ai.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, the prefix of every object. */}}
{{- define "otelcol-ai.fullname" -}}
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

{{- define "otelcol-ai.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ include "otelcol-ai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "otelcol-ai.selectorLabels" -}}
app.kubernetes.io/name: {{ include "otelcol-ai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The agent's ServiceAccount. */}}
{{- define "otelcol-ai.agentServiceAccountName" -}}
{{- with .Values.agent.serviceAccount -}}
{{- if .create -}}
{{- default (printf "%s-agent" (include "otelcol-ai.fullname" $)) .name -}}
{{- else -}}
{{- default "default" .name -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The gateway's ServiceAccount. */}}
{{- define "otelcol-ai.gatewayServiceAccountName" -}}
{{- with .Values.gateway.serviceAccount -}}
{{- if .create -}}
{{- default (printf "%s-gateway" (include "otelcol-ai.fullname" $)) .name -}}
{{- else -}}
{{- default "default" .name -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Whether the agent's pod mounts its ServiceAccount token: k8s_attributes
needs it; agent.automountServiceAccountToken asks for it otherwise.
*/}}
{{/* Whether the jfr receiver reads pod and namespace opt-outs from the API ("true" or ""). */}}
{{- define "otelcol-ai.jfrPodOptOut" -}}
{{- if and .Values.agent.jfrAttach.enabled .Values.agent.jfrAttach.podOptOut }}true{{ end -}}
{{- end -}}

{{- define "otelcol-ai.agentToken" -}}
{{- or .Values.agent.k8sAttributes.enabled (include "otelcol-ai.jfrPodOptOut" .) .Values.agent.automountServiceAccountToken -}}
{{- end -}}

{{/* The image: repository@digest when image.digest is set, else repository:tag. */}}
{{- define "otelcol-ai.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
GOMEMLIMIT from a memory limit in Mi or Gi and a percentage, in MiB; empty
when the limit is in another unit or unset.
*/}}
{{- define "otelcol-ai.goMemLimit" -}}
{{- $limit := toString (default "" .limit) -}}
{{- $mib := 0 -}}
{{- if hasSuffix "Gi" $limit -}}
{{- $mib = mul (trimSuffix "Gi" $limit | atoi) 1024 -}}
{{- else if hasSuffix "Mi" $limit -}}
{{- $mib = trimSuffix "Mi" $limit | atoi -}}
{{- end -}}
{{- if gt (int $mib) 0 -}}
{{- printf "%dMiB" (div (mul $mib .percent) 100) -}}
{{- end -}}
{{- end -}}

{{/* Environment every collector container gets from the downward API. */}}
{{- define "otelcol-ai.downwardEnv" -}}
- name: K8S_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: K8S_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: K8S_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: K8S_POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
{{- end -}}

{{/*
The agent's added capabilities as a YAML list: agent.capabilities, and
agent.jfrAttach.capabilities while attach is on.
*/}}
{{- define "otelcol-ai.agentCapabilities" -}}
{{- $caps := .Values.agent.capabilities -}}
{{- if .Values.agent.jfrAttach.enabled -}}
{{- $caps = concat $caps .Values.agent.jfrAttach.capabilities | uniq -}}
{{- end -}}
{{- toYaml $caps -}}
{{- end -}}

{{/*
The address the agent's Prometheus endpoints (8889, 8888) listen on:
127.0.0.1, or the pod IP (the kubelet expands $(K8S_POD_IP)).
*/}}
{{- define "otelcol-ai.agentMetricsHost" -}}
{{- if eq .Values.agent.metricsListen "podIP" -}}
$(K8S_POD_IP)
{{- else -}}
127.0.0.1
{{- end -}}
{{- end -}}

{{/*
A monitor endpoint's relabelings and metricRelabelings: with clusterName
set, a first relabeling that gives every scraped series the label cluster
(what the dashboards' $cluster variable and the collector's own metrics'
panels select on), then the monitor's own. Called with (dict "Values"
.Values "monitor" <podMonitor or serviceMonitor values>).
*/}}
{{- define "otelcol-ai.monitorRelabelings" -}}
{{- $relabelings := list -}}
{{- with .Values.clusterName -}}
{{- $relabelings = append $relabelings (dict "action" "replace" "targetLabel" "cluster" "replacement" .) -}}
{{- end -}}
{{- $relabelings = concat $relabelings (default list .monitor.relabelings) -}}
{{- with $relabelings }}
relabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .monitor.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
