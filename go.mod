module github.com/otelcol-ai/otelcol-ai

go 1.26
