module github.com/switchyard-ai/switchyard/tools

go 1.26.8
