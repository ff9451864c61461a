package handoff

import "github.com/redis/go-redis/v9"

// What claimScript found.
const (
	claimTaken    = 0 // the caller now holds the pair
	claimAnswered = 1 // the pair has an answer
	claimHeld     = 2 // another call holds the pair
)

// claimScript returns a pair's answer, or claims the pair for the caller. A claim adds the
// caller's token to the pair's open calls and returns the tokens already there: calls
// whose claim expired without an answer or a release — their router died mid-call.
//
//	KEYS[1] answer key, KEYS[2] claim key, KEYS[3] open-calls key
//	ARGV[1] the caller's token, ARGV[2] the claim's TTL (ms), ARGV[3] the open calls' TTL (ms)
//	returns {1, answer} (claimAnswered), {0, token...} (claimTaken; the cut-off calls'
//	tokens) or {2} (claimHeld)
var claimScript = redis.NewScript(`
local answer = redis.call('GET', KEYS[1])
if answer then return {1, answer} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local cut = redis.call('SMEMBERS', KEYS[3])
  redis.call('SADD', KEYS[3], ARGV[1])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  local out = {0}
  for _, t in ipairs(cut) do out[#out + 1] = t end
  return out
end
return {2}
`)

// finishScript stores a pair's answer, closes the caller's call and drops the claim if it
// is still the caller's. The first answer stored wins: a call that lost its claim (it
// stalled past the TTL while another took over) does not replace an answer already handed
// out.
//
//	KEYS[1] answer key, KEYS[2] claim key, KEYS[3] open-calls key
//	ARGV[1] the answer, ARGV[2] its TTL (ms), ARGV[3] the caller's token
//	returns 1 when the claim was still the caller's, else 0
var finishScript = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
redis.call('SREM', KEYS[3], ARGV[3])
if redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
`)

// releaseScript closes the caller's call (it failed: nothing was paid) and drops the
// claim if it is still the caller's.
//
//	KEYS[1] claim key, KEYS[2] open-calls key
//	ARGV[1] the caller's token
//	returns 1 when it dropped the claim, else 0
var releaseScript = redis.NewScript(`
redis.call('SREM', KEYS[2], ARGV[1])
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
