package postgres

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/switchyard-ai/switchyard/shared/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder turns a Handler's calls into events a test waits on.
type recorder struct{ events chan string }

func newRecorder() *recorder { return &recorder{events: make(chan string, 64)} }

func (r *recorder) handler() Handler {
	return Handler{
		Notify: func(_ context.Context, payload string) { r.events <- "notify " + payload },
		Resync: func(context.Context) { r.events <- "resync" },
		Lost:   func() { r.events <- "lost" },
	}
}

// next waits for the recorder's next event.
func (r *recorder) next(t *testing.T) string {
	t.Helper()
	select {
	case e := <-r.events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no notifier event within 10s")
		return ""
	}
}

// A Notifier delivers each topic's notifications to its handlers, resyncs them first, and —
// after its connection is killed by the server (pg_terminate_backend) — reconnects, tells
// them they lost notifications and resyncs them again before delivering the next.
func TestNotifierDeliversAndResyncsAfterReconnect(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	n := NewNotifier(pool, slog.New(slog.DiscardHandler))
	n.MinBackoff = 10 * time.Millisecond
	a, b := newRecorder(), newRecorder()
	n.Subscribe("registry_changed", a.handler())
	n.Subscribe("Odd-Topic", b.handler()) // a name that must be quoted
	require.NoError(t, n.Start(ctx))
	defer n.Stop()
	require.Equal(t, "resync", a.next(t))
	require.Equal(t, "resync", b.next(t))

	notify := func(topic, payload string) {
		_, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", topic, payload)
		require.NoError(t, err)
	}
	notify("registry_changed", "one")
	notify("Odd-Topic", "two")
	require.Equal(t, "notify one", a.next(t))
	require.Equal(t, "notify two", b.next(t))

	pid := n.PID()
	require.NotZero(t, pid)
	var killed bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&killed))
	require.True(t, killed)
	require.Equal(t, "lost", a.next(t))
	require.Equal(t, "resync", a.next(t), "after the reconnection, the handler resyncs")
	require.Equal(t, "lost", b.next(t))
	require.Equal(t, "resync", b.next(t))
	require.NotEqual(t, pid, n.PID(), "a new connection")

	notify("registry_changed", "three")
	require.Equal(t, "notify three", a.next(t))
}

// A topic subscribed while the Notifier runs is LISTENed on the live connection and resynced
// before its first notification; an ended subscription receives nothing more.
func TestNotifierSubscribeWhileRunning(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	ctx := context.Background()
	n := NewNotifier(pool, slog.New(slog.DiscardHandler))
	require.NoError(t, n.Start(ctx))
	defer n.Stop()
	pid := n.PID()

	late := newRecorder()
	unsubscribe := n.Subscribe("late_topic", late.handler())
	require.Equal(t, "resync", late.next(t))
	_, err := pool.Exec(ctx, "SELECT pg_notify('late_topic', 'hello')")
	require.NoError(t, err)
	require.Equal(t, "notify hello", late.next(t))
	require.Equal(t, pid, n.PID(), "the same connection")

	unsubscribe()
	other := newRecorder()
	n.Subscribe("late_topic", other.handler())
	require.Equal(t, "resync", other.next(t))
	_, err = pool.Exec(ctx, "SELECT pg_notify('late_topic', 'again')")
	require.NoError(t, err)
	require.Equal(t, "notify again", other.next(t))
	select {
	case e := <-late.events:
		t.Fatalf("an ended subscription received %q", e)
	default:
	}
}

// Start reports a first connection that fails, and the Notifier keeps trying until Stop.
func TestNotifierStartFailsOnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	_, pool := testkit.DB(t)
	n := NewNotifier(pool, slog.New(slog.DiscardHandler))
	n.config.Port = 1 // nothing listens there
	n.config.ConnectTimeout = time.Second
	r := newRecorder()
	n.Subscribe("registry_changed", r.handler())
	require.Error(t, n.Start(context.Background()))
	n.Stop()
	select {
	case e := <-r.events:
		t.Fatalf("a handler of a notifier that never connected got %q", e)
	default:
	}
}
