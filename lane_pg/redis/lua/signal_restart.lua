-- lane.signal_restart's wake-up of one queue (the signal itself is the client's write to
-- the settings hash, another slot): idle claimers of an existing queue look now, not at
-- their next poll (CLI-6).
-- @include json
-- @include events

if redis.call('EXISTS', KEYS[1]) == 1 then
  lane_wake_unchecked()
end
return lane_result(cjson.null)
