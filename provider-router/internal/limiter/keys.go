package limiter

import (
	"net/url"
	"sync"
)

// keyPrefix starts every Redis key and channel this package touches, so an operator can
// find (or flush) all rate-limit state with one SCAN pattern.
const keyPrefix = "sy:lim:"

// wakeChannel is the one Pub/Sub channel of every limiter: the payload is the id of the
// waiter that should look again (the new head of a queue). One channel for all buckets keeps
// a replica at one subscription however many buckets it serves; ids are random, so a
// message meant for another replica's waiter is simply ignored.
const wakeChannel = keyPrefix + "wake"

// The positions of a bucket's keys in every script's KEYS. All share one hash tag, so a
// script touching them runs on one Redis Cluster node.
const (
	kLimits   = iota // hash rpm, tpm: the configured limits (no TTL: it is configuration)
	kState           // hash rt, tt, ts, blk: balances, last refill (µs), blocked-until (µs)
	kQueue           // zset waiter id -> composite order (priority, group in-flight, arrival)
	kLease           // zset waiter id -> lease expiry (µs); expired waiters are pruned
	kHeld            // zset reservation id -> hold expiry (µs); admitted and not yet released
	kInfo            // hash id -> "priority|seq|group" for waiters and held reservations
	kGroupIdx        // zset (all score 0) "group\x00id" of waiters, range-read by group
	kOut             // hash group -> calls outstanding (waiting or held) against this bucket
	kSeq             // string: arrival counter (FIFO order)
	kPark            // string: the latest return slot (µs) handed to a parked call (see parkScript)
	kPending         // hash group -> the group's calls not yet asked for (Request.Pending), latest reported
	numKeys
)

var keyCache sync.Map // BucketKey -> []string

// bucketKeys returns the Redis keys of one bucket, in the k* order above. Credential and
// model are query-escaped so neither braces (which would move the hash tag) nor separators
// can make two buckets share a key.
func bucketKeys(k BucketKey) []string {
	if v, ok := keyCache.Load(k); ok {
		return v.([]string)
	}
	base := keyPrefix + "{" + url.QueryEscape(k.Credential) + "/" + url.QueryEscape(k.Model) + "}:"
	keys := make([]string, numKeys)
	for i, suffix := range [numKeys]string{"limits", "state", "q", "lease", "held", "info", "gidx", "out", "seq", "park", "pend"} {
		keys[i] = base + suffix
	}
	v, _ := keyCache.LoadOrStore(k, keys)
	return v.([]string)
}
