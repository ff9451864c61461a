package handoff

import "github.com/redis/go-redis/v9"

// What claimScript found.
const (
	claimTaken    = 0 // the caller now holds the pair
	claimAnswered = 1 // the pair has an answer
	claimHeld     = 2 // another call holds the pair
)

// claimScript returns a pair's answer, or claims the pair for the caller.
//
//	KEYS[1] answer key, KEYS[2] claim key
//	ARGV[1] the caller's token, ARGV[2] the claim's TTL (ms)
//	returns {1, answer} (claimAnswered), {0} (claimTaken) or {2} (claimHeld)
var claimScript = redis.NewScript(`
local answer = redis.call('GET', KEYS[1])
if answer then return {1, answer} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end
return {2}
`)

// finishScript stores a pair's answer and drops the claim if it is still the caller's. The
// first answer stored wins: a call that lost its claim (it stalled past the TTL while
// another took over) does not replace an answer already handed out.
//
//	KEYS[1] answer key, KEYS[2] claim key
//	ARGV[1] the answer, ARGV[2] its TTL (ms), ARGV[3] the caller's token
//	returns 1 when the claim was still the caller's, else 0
var finishScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
`)

// releaseScript drops a claim if it is still the caller's.
//
//	KEYS[1] claim key
//	ARGV[1] the caller's token
//	returns 1 when it dropped the claim, else 0
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// renewScript extends a claim if it is still the caller's.
//
//	KEYS[1] claim key
//	ARGV[1] the caller's token, ARGV[2] the claim's TTL (ms)
//	returns 1 when it extended the claim, 0 when the claim is no longer the caller's
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`)
