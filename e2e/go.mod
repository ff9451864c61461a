module github.com/switchyard-ai/switchyard/e2e

go 1.26.8
