package queue

import "strings"

// asynq's Redis key layout (internal/base in asynq v0.26), which nothing outside this
// package may spell out: the contract test (contract_test.go) enqueues and dequeues through
// the pinned asynq and checks that these are the keys and fields it writes.

// PendingKey is the Redis list of an asynq queue's pending task ids, dequeued from the
// right: what an autoscaler such as KEDA reads as the backlog.
func PendingKey(asynqQueue string) string { return "asynq:{" + asynqQueue + "}:pending" }

// activeKey is the list of the task ids a worker has taken.
func activeKey(q string) string { return "asynq:{" + q + "}:active" }

// leaseKey is the sorted set of active task ids scored by their lease's expiry (unix seconds).
func leaseKey(q string) string { return "asynq:{" + q + "}:lease" }

// pausedKey exists while the queue is paused.
func pausedKey(q string) string { return "asynq:{" + q + "}:paused" }

// taskPrefix prefixes a task id to name the task's hash (fields msg, state, ...).
func taskPrefix(q string) string { return "asynq:{" + q + "}:t:" }

// allQueues is asynq's set of queue names (base.AllQueues).
const allQueues = "asynq:queues"

// queueOfKey returns q of "asynq:{q}:<suffix>".
func queueOfKey(key, suffix string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "asynq:{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "}:"+suffix)
}

// wakeChannel is the Pub/Sub channel on which every producer announces a push onto an asynq
// queue's pending list (wake.go). It is Switchyard's, not asynq's.
func wakeChannel(q string) string { return "switchyard:queue:wake:{" + q + "}" }

// queueOfWakeChannel returns q of wakeChannel(q).
func queueOfWakeChannel(ch string) (string, bool) {
	rest, ok := strings.CutPrefix(ch, "switchyard:queue:wake:{")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "}")
}
