// Package queue is Switchyard's one adapter to asynq, and the contract between the
// dispatcher, which enqueues runs, and the executors, which consume them: task types,
// payloads, how one named queue of the registry maps onto asynq queues — and everything that
// knows asynq's internals (its Redis key layout, its scripts' shapes, its lease constants):
// the wake-ups of idle queues (wake.go), the fast recovery of dead workers' tasks
// (recover.go), the backlog an autoscaler reads (inspect.go). contract_test.go checks that
// knowledge against the pinned asynq version, so an upgrade that changes it fails there.
//
// asynq has no priority inside a queue, so each named queue is served as one asynq queue
// per priority tier ("<name>:critical" ... "<name>:low"). Executors serve the tiers with
// weights, so higher tiers go first without starving lower ones. The backlog of a named
// queue is the sum of the Redis lists asynq:{<name>:<tier>}:pending (Pending).
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/switchyard-ai/switchyard/shared/run"
)

// Task types.
const (
	// TypeRun executes one run; the payload is a RunTask.
	TypeRun = "run:execute"
	// TypeStepDone reports a chain step's end to the coordinator; the payload is a StepDone.
	TypeStepDone = "chain:step_done"
	// TypeChainStart starts a dispatched chain (its roots); TypeChainTimeout ends a chain
	// whose deadline passed. Both carry a ChainTask.
	TypeChainStart   = "chain:start"
	TypeChainTimeout = "chain:timeout"
)

// Coordinator is the asynq queue through which executors report chain-step completions
// (and chains' deadlines come due); CoordinatorStarts holds the chains waiting to start.
// The coordinator serves them with strict priority: a chain already running moves on
// before another one is admitted, so that under load the wait is at a chain's start —
// where nothing has begun — and not between its steps.
const (
	Coordinator       = "coordinator"
	CoordinatorStarts = "coordinator_starts"
)

// Weights are the shares each priority tier gets when all tiers have work.
var Weights = map[run.Priority]int{
	run.PriorityCritical: 8,
	run.PriorityHigh:     4,
	run.PriorityNormal:   2,
	run.PriorityLow:      1,
}

// Tier is the asynq queue that holds a named queue's tasks of one priority.
func Tier(name string, p run.Priority) string { return name + ":" + string(p) }

// NamedQueue is the named queue of an asynq queue made by Tier (the coordinator queue is its
// own).
func NamedQueue(asynqQueue string) string {
	name, _, _ := strings.Cut(asynqQueue, ":")
	return name
}

// Tiers returns the asynq queues of a named queue with their weights, as asynq.Config.Queues
// wants them.
func Tiers(name string) map[string]int {
	m := make(map[string]int, len(Weights))
	for p, w := range Weights {
		m[Tier(name, p)] = w
	}
	return m
}

// RunTask is the payload of a TypeRun task. The run itself lives in Postgres; the task only
// points at it, so a task can be rebuilt from the row at any time.
type RunTask struct {
	RunID string `json:"run_id"`
	OrgID string `json:"org_id"`
}

// Enqueue describes how a run is put on its queue.
type Enqueue struct {
	RunID    string
	OrgID    string
	Queue    string
	Priority run.Priority
	// Timeout bounds one attempt; MaxRetry is the number of retries after the first attempt.
	Timeout  time.Duration
	MaxRetry int
	// Retention keeps the finished task visible in Redis for inspection.
	Retention time.Duration
}

// NewRunTask builds the asynq task for a run. Its task id is the run id, so enqueueing the
// same run twice never puts two tasks on the queue (asynq answers ErrTaskIDConflict).
func NewRunTask(e Enqueue) (*asynq.Task, error) {
	if e.RunID == "" || e.OrgID == "" || e.Queue == "" {
		return nil, fmt.Errorf("run task needs run id, org id and queue")
	}
	payload, err := json.Marshal(RunTask{RunID: e.RunID, OrgID: e.OrgID})
	if err != nil {
		return nil, err
	}
	opts := []asynq.Option{
		asynq.TaskID(e.RunID),
		asynq.Queue(Tier(e.Queue, e.Priority)),
		asynq.MaxRetry(e.MaxRetry + 1), // see RetryBudget
	}
	if e.Timeout > 0 {
		opts = append(opts, asynq.Timeout(e.Timeout))
	}
	if e.Retention > 0 {
		opts = append(opts, asynq.Retention(e.Retention))
	}
	return asynq.NewTask(TypeRun, payload, opts...), nil
}

// RetryBudget is the run's retry budget (Enqueue.MaxRetry) of a run task whose asynq
// maximum is maxRetry. The task carries one retry more than the run's budget because asynq
// archives a task that has reached its maximum whatever the handler answers — also a
// park, which is not a failure — so the run's last permitted attempt could not park. The
// executor fails the run itself when the budget is spent; the extra retry is only ever
// used by a worker dying in that last attempt.
func RetryBudget(maxRetry int) int { return max(maxRetry-1, 0) }

// Parked is returned by a run task's handler that put its run back to queued to wait —
// for provider capacity — rather than failing: asynq retries the task after Delay without
// counting a failure (the executor's asynq.Config.IsFailure and RetryDelayFunc).
type Parked struct {
	Delay  time.Duration
	Reason string
}

func (p *Parked) Error() string {
	return fmt.Sprintf("run parked for %s (%s)", p.Delay.Round(time.Millisecond), p.Reason)
}

// Register adds an asynq queue to asynq's set of queues. asynq's client adds a queue there on
// its first enqueue and then remembers, for the life of the process, that it did: when Redis
// loses its data, the set stays without that process's queues, and asynq's Inspector answers
// ErrQueueNotFound even for tasks that exist. Register is what the client would have done.
func Register(ctx context.Context, rdb redis.UniversalClient, asynqQueue string) error {
	return rdb.SAdd(ctx, allQueues, asynqQueue).Err()
}

// StepDone is the payload of a TypeStepDone task.
type StepDone struct {
	ChainID string          `json:"chain_id"`
	Step    string          `json:"step"`
	RunID   string          `json:"run_id"`
	OrgID   string          `json:"org_id"`
	Status  run.Status      `json:"status"`
	Output  json.RawMessage `json:"output,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// NewStepDoneTask builds the coordinator task for a finished chain step. The task id makes
// a duplicate report of the same run's end a no-op while the first is still held.
func NewStepDoneTask(d StepDone) (*asynq.Task, error) {
	payload, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeStepDone, payload,
		asynq.TaskID("step_done:"+d.RunID), asynq.Queue(Coordinator), asynq.MaxRetry(25)), nil
}

// ChainTask is the payload of TypeChainStart and TypeChainTimeout.
type ChainTask struct {
	ChainID string `json:"chain_id"`
}

// NewChainStartTask builds the coordinator task that starts a chain. The task id makes a
// repeated start (the reconciler's, an approval retried) a no-op while one is held.
func NewChainStartTask(chainID string) (*asynq.Task, error) {
	payload, err := json.Marshal(ChainTask{ChainID: chainID})
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeChainStart, payload,
		asynq.TaskID("chain_start:"+chainID), asynq.Queue(CoordinatorStarts), asynq.MaxRetry(25)), nil
}

// NewChainTimeoutTask builds the coordinator task that times a chain out at its deadline.
func NewChainTimeoutTask(chainID string, at time.Time) (*asynq.Task, error) {
	payload, err := json.Marshal(ChainTask{ChainID: chainID})
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeChainTimeout, payload, asynq.TaskID("chain_timeout:"+chainID),
		asynq.Queue(Coordinator), asynq.MaxRetry(25), asynq.ProcessAt(at)), nil
}

// ForgetQueues empties asynq's set of queues, as Redis losing its data does while asynq's
// clients still remember having registered theirs: for tests of the recovery from that.
func ForgetQueues(ctx context.Context, rdb redis.UniversalClient) error {
	return rdb.Del(ctx, allQueues).Err()
}
