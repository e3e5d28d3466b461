-- lane.upsert_repeat (REP-8, -9, -13): creates the series of `args.spec`, or replaces its
-- owner: the old owner is removed (`removed`, its dedup id released) and the new job
-- starts the series again, its row rebuilt whole. A running owner refuses the call
-- ({error = 'state_conflict'}) before anything is written. Returns the new owner.
-- @include json
-- @include now
-- @include add

local args = lane_args()
local now = lane_now(args.now)
local spec = args.spec
local series_key = spec.series.key
local row = lane_series(series_key)
local owner = nil
if row ~= nil then
  owner = lane_series_owner(series_key, row)
end
if owner ~= nil and (owner.state == 'active' or owner.parent_id ~= nil) then
  local why = 'in a flow'
  if owner.state == 'active' then
    why = 'active'
  end
  return lane_result({error = 'state_conflict', message = 'job ' .. owner.id
                      .. ' owns repeat series ' .. cjson.encode(series_key) .. ' and is '
                      .. why .. ': it cannot be replaced'})
end
local refused = lane_add_check(args, {spec}, now)
if refused ~= nil then
  return lane_result(refused)
end
lane_ensure_queue(now)
if owner ~= nil then
  local prev = owner.state
  if owner.dedup_id ~= nil then
    local dedup_owner = lane_owner(owner.dedup_id)
    if dedup_owner ~= nil and dedup_owner.job_key == owner.key then
      lane_owner_delete(owner.dedup_id, now)
    end
  end
  lane_delete(owner)
  lane_emit('removed', owner.id, {prev = prev}, now)
end
return lane_result(lane_add_specs({spec}, now)[1])
