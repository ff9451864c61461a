module github.com/switchyard-ai/switchyard/e2e

go 1.26.8

require (
	github.com/hibiken/asynq v0.26.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/switchyard-ai/switchyard/harness v0.0.0
	github.com/switchyard-ai/switchyard/runstore v0.0.0
	github.com/switchyard-ai/switchyard/shared v0.0.0
)

require (
	filippo.io/age v1.3.2 // indirect
	filippo.io/hpke v0.4.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/time v0.15.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/google/uuid v1.6.0
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mfridman/interpolate v0.0.2 // indirect
	github.com/pressly/goose/v3 v3.29.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/sethvargo/go-retry v0.5.0 // indirect
	github.com/stretchr/testify v1.12.1
	github.com/switchyard-ai/switchyard/migrations v0.0.0 // indirect
	github.com/switchyard-ai/switchyard/queue v0.0.0
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace (
	github.com/switchyard-ai/switchyard/harness => ../harness
	github.com/switchyard-ai/switchyard/migrations => ../migrations
	github.com/switchyard-ai/switchyard/runstore => ../runstore
	github.com/switchyard-ai/switchyard/shared => ../shared
)

replace github.com/switchyard-ai/switchyard/queue => ../queue

require github.com/switchyard-ai/switchyard/client v0.0.0 // indirect

replace github.com/switchyard-ai/switchyard/client => ../client
