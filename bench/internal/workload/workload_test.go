package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestArrivals(t *testing.T) {
	t.Parallel()
	c, err := Arrivals("constant", 30, 30, 3)
	require.NoError(t, err)
	require.Len(t, c, 30)
	require.Equal(t, 29*4*time.Second/30, c[29]) // every 4 s, compressed 30-fold

	b, err := Arrivals("bursty", 30, 1, 3)
	require.NoError(t, err)
	require.Len(t, b, 30)
	again, _ := Arrivals("bursty", 30, 1, 3)
	require.Equal(t, b, again, "the seed fixes the arrivals")
	gaps := 0
	for i := 1; i < len(b); i++ {
		d := b[i] - b[i-1]
		require.True(t, d >= 500*time.Millisecond, "gap %d: %s", i, d)
		if d >= 15*time.Second {
			gaps++
		}
	}
	require.GreaterOrEqual(t, gaps, 30/5-1, "bursts of at most 5 sessions")

	_, err = Arrivals("poisson", 1, 1, 3)
	require.Error(t, err)
}

func TestMakespans(t *testing.T) {
	t.Parallel()
	var m Makespans
	require.Zero(t, m.Mean())
	require.Zero(t, m.P95())
	for i := 1; i <= 20; i++ {
		m = append(m, float64(21-i))
	}
	require.InDelta(t, 10.5, m.Mean(), 1e-9)
	require.Equal(t, 19.0, m.P95()) // nearest rank: the 19th of 20
}

func TestWords(t *testing.T) {
	t.Parallel()
	w := Words(300)
	require.GreaterOrEqual(t, len(w), 1200)
	require.Less(t, len(w), 1206)
}
