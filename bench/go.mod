module github.com/switchyard-ai/switchyard/bench

go 1.26.8
