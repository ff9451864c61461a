package ratelimit

import (
	"strconv"
	"time"
)

// keyPrefix starts every key this package writes.
const keyPrefix = "sy:rl:"

// orgKey and userKey build the only two key names of the package. Both carry the
// organisation as a Redis Cluster hash tag ({org}) so that one script can touch both: a Lua
// script may only use keys of one slot. The window length is part of the name so that a
// changed window starts from a clean count instead of misreading the old one.
//
//	sy:rl:{<org_id>}:org:<window_ms>
//	sy:rl:{<org_id>}:user:<user_id>:<window_ms>
func orgKey(orgID string, window time.Duration) string {
	return keyPrefix + "{" + orgID + "}:org:" + strconv.FormatInt(window.Milliseconds(), 10)
}

func userKey(orgID, userID string, window time.Duration) string {
	return keyPrefix + "{" + orgID + "}:user:" + userID + ":" + strconv.FormatInt(window.Milliseconds(), 10)
}
