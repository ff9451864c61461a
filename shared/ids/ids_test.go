package ids_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/switchyard-ai/switchyard/shared/ids"
)

func TestIDsAreVersion7AndIncrease(t *testing.T) {
	prev := ""
	for range 10_000 {
		id := ids.New()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("%q is not a UUIDv7 (%v)", id, err)
		}
		if id <= prev {
			t.Fatalf("%q made after %q sorts before it", id, prev)
		}
		prev = id
	}
}
