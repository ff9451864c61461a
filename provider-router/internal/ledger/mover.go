package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// writeTimeout bounds one attempt to write a batch to Postgres.
const writeTimeout = 10 * time.Second

// readBlock is how long a read waits for new entries. Stop waits for the read in
// progress, so it is short; an idle replica reads four times a second.
const readBlock = 250 * time.Millisecond

// idleConsumer is how long a consumer with nothing pending stays in the group after its
// last read: a replica that stopped for good is forgotten after it.
const idleConsumer = time.Hour

func (w *Writer) ensureGroup(ctx context.Context) error {
	err := w.rdb.XGroupCreateMkStream(ctx, streamKey, group, "0").Err()
	if err != nil && redis.HasErrorPrefix(err, "BUSYGROUP") {
		return nil
	}
	return err
}

func (w *Writer) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// move is the mover loop: it claims what dead replicas left, reads new entries, writes
// them to Postgres and acknowledges them, until Stop.
func (w *Writer) move() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var lastClaim time.Time
	failures := 0
	for !w.stopping() {
		if time.Since(lastClaim) >= w.opts.ClaimIdle/2 {
			lastClaim = time.Now()
			if !w.claim(ctx) {
				return
			}
		}
		msgs, err := w.read(ctx)
		if err != nil {
			if w.stopping() {
				return
			}
			w.log.Warn("reading the usage ledger stream", "error", err)
			if !sleep(ctx, w.stop, w.backoff(failures)) {
				return
			}
			failures++
			continue
		}
		failures = 0
		if len(msgs) > 0 && !w.write(msgs) {
			return
		}
		if n, err := Backlog(ctx, w.rdb); err == nil {
			w.m.Backlog(n)
		}
		if len(msgs) > 0 && len(msgs) < w.opts.Batch && !sleep(ctx, w.stop, w.opts.Linger) {
			return
		}
	}
}

// Backlog returns how many entries the stream holds that are not yet in Postgres.
func Backlog(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	return rdb.XLen(ctx, streamKey).Result()
}

// read returns the next new entries for this replica, waiting up to readBlock for some.
func (w *Writer) read(ctx context.Context) ([]redis.XMessage, error) {
	args := &redis.XReadGroupArgs{Group: group, Consumer: w.opts.Consumer, Streams: []string{streamKey, ">"},
		Count: int64(w.opts.Batch), Block: readBlock}
	streams, err := w.rdb.XReadGroup(ctx, args).Result()
	if redis.HasErrorPrefix(err, "NOGROUP") { // the stream was lost with Redis's data: start again
		if err = w.ensureGroup(ctx); err == nil {
			streams, err = w.rdb.XReadGroup(ctx, args).Result()
		}
	}
	if errors.Is(err, redis.Nil) || len(streams) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return streams[0].Messages, nil
}

// claim takes over the entries other replicas read but left unwritten for ClaimIdle (they
// died, or cannot reach Postgres: a second writer is harmless) and writes them; it also
// forgets consumers long gone. It returns false when Stop came first.
func (w *Writer) claim(ctx context.Context) bool {
	start := "0-0"
	for {
		msgs, next, err := w.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: streamKey, Group: group,
			Consumer: w.opts.Consumer, MinIdle: w.opts.ClaimIdle, Start: start, Count: int64(w.opts.Batch)}).Result()
		if err != nil {
			if !w.stopping() && !redis.HasErrorPrefix(err, "NOGROUP") {
				w.log.Warn("claiming usage entries other replicas left", "error", err)
			}
			return !w.stopping()
		}
		if len(msgs) > 0 {
			w.log.Info("claimed usage entries another replica read but did not write", "count", len(msgs))
			if !w.write(msgs) {
				return false
			}
		}
		if next == "0-0" || next == "" {
			break
		}
		start = next
	}
	consumers, err := w.rdb.XInfoConsumers(ctx, streamKey, group).Result()
	if err != nil {
		return !w.stopping()
	}
	for _, c := range consumers {
		if c.Name != w.opts.Consumer && c.Pending == 0 && c.Idle > idleConsumer {
			_ = w.rdb.XGroupDelConsumer(ctx, streamKey, group, c.Name).Err()
		}
	}
	return !w.stopping()
}

// write stores a batch read from the stream in Postgres and acknowledges it, retrying with
// backoff while Postgres cannot be written. It returns false when Stop came first; the
// batch then stays pending for another replica (or this one's successor) to claim.
func (w *Writer) write(msgs []redis.XMessage) bool {
	entries := make([]Entry, 0, len(msgs))
	ids := make([]string, 0, len(msgs))
	var bad []redis.XMessage
	for _, msg := range msgs {
		raw, _ := msg.Values[fieldEntry].(string)
		e, err := decode(raw)
		if err != nil || e.CallKey == "" {
			bad = append(bad, msg)
			continue
		}
		entries = append(entries, e)
		ids = append(ids, msg.ID)
	}
	if len(bad) > 0 {
		w.bury(bad, errors.New("not a usage entry"))
	}
	entries = dedupe(entries)
	for failures := 0; len(entries) > 0; failures++ {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		inserted, err := insert(ctx, w.db, entries)
		cancel()
		if err == nil {
			w.m.Moved(MovedInserted, inserted)
			w.m.Moved(MovedDuplicate, len(entries)-inserted)
			break
		}
		if invalidData(err) {
			if err = w.writeEach(entries, msgs); err == nil {
				break
			}
		}
		w.m.MoveFailed()
		w.log.Warn("writing usage entries to Postgres; retrying", "entries", len(entries), "attempt", failures+1, "error", err)
		if !sleep(context.Background(), w.stop, w.backoff(failures)) {
			return false
		}
	}
	w.ack(ids)
	return true
}

// writeEach writes entries one at a time after Postgres refused their batch as invalid:
// each refused entry goes to the dead-letter stream, the rest to the ledger. An error
// other than invalid data is returned, and the batch is tried again.
func (w *Writer) writeEach(entries []Entry, msgs []redis.XMessage) error {
	byKey := map[string]redis.XMessage{}
	for _, msg := range msgs {
		raw, _ := msg.Values[fieldEntry].(string)
		if e, err := decode(raw); err == nil {
			byKey[e.CallKey] = msg
		}
	}
	for _, e := range entries {
		ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
		inserted, err := insert(ctx, w.db, []Entry{e})
		cancel()
		switch {
		case err == nil && inserted == 1:
			w.m.Moved(MovedInserted, 1)
		case err == nil:
			w.m.Moved(MovedDuplicate, 1)
		case invalidData(err):
			w.bury([]redis.XMessage{byKey[e.CallKey]}, err)
		default:
			return err
		}
	}
	return nil
}

// bury moves messages Postgres can never accept to the dead-letter stream, for an
// operator to repair and replay; the log line names each.
func (w *Writer) bury(msgs []redis.XMessage, cause error) {
	ctx := context.Background()
	ids := make([]string, 0, len(msgs))
	for _, msg := range msgs {
		raw, _ := msg.Values[fieldEntry].(string)
		if err := w.rdb.XAdd(ctx, &redis.XAddArgs{Stream: deadKey,
			Values: []any{fieldEntry, raw, "error", cause.Error(), "id", msg.ID}}).Err(); err != nil {
			w.log.Error("moving an invalid usage entry to the dead-letter stream", "id", msg.ID, "error", err)
			continue // left pending: claimed and tried again later
		}
		w.log.Error("Postgres refused a usage entry as invalid; it is kept in the dead-letter stream",
			"stream", deadKey, "id", msg.ID, "error", cause)
		ids = append(ids, msg.ID)
	}
	w.m.Moved(MovedDead, len(ids))
	w.ack(ids)
}

// ack acknowledges and deletes moved messages, in one round trip. If it fails they stay
// pending, are claimed later and written again: a no-op, thanks to their call keys.
func (w *Writer) ack(ids []string) {
	if len(ids) == 0 {
		return
	}
	ctx := context.Background()
	pipe := w.rdb.Pipeline()
	pipe.XAck(ctx, streamKey, group, ids...)
	pipe.XDel(ctx, streamKey, ids...)
	if _, err := pipe.Exec(ctx); err != nil {
		w.log.Warn("acknowledging moved usage entries", "entries", len(ids), "error", err)
	}
}
