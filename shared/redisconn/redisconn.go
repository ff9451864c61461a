// Package redisconn turns one Redis URL into the go-redis client and the asynq connection
// options every process uses, so they always point at the same server and database.
package redisconn

import (
	"context"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Options parses a redis:// URL.
func Options(url string) (*redis.Options, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parsing redis url: %w", err)
	}
	return opt, nil
}

// Connect opens a client to url and checks that it answers.
func Connect(ctx context.Context, url string) (*redis.Client, error) {
	opt, err := Options(url)
	if err != nil {
		return nil, err
	}
	c := redis.NewClient(opt)
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pingCtx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("connecting to redis at %s: %w", opt.Addr, err)
	}
	return c, nil
}

// Asynq returns asynq's connection options for url.
func Asynq(url string) (asynq.RedisClientOpt, error) {
	opt, err := Options(url)
	if err != nil {
		return asynq.RedisClientOpt{}, err
	}
	return asynq.RedisClientOpt{
		Network:  opt.Network,
		Addr:     opt.Addr,
		Username: opt.Username,
		Password: opt.Password,
		DB:       opt.DB,
		PoolSize: opt.PoolSize,
	}, nil
}
