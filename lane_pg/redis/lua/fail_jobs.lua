-- lane.fail_jobs for one queue's items {id, token, reason, stacktrace?, discard_retry,
-- uniform, limit?}: each item active under its token fails one attempt (FIN-3..6, RETRY-7),
-- any other is reported and left unchanged. Returns, per item, [status, state, job?].
-- @include json
-- @include now
-- @include finish

local function given(value)
  if value == cjson.null then
    return nil
  end
  return value
end

local args = lane_args()
local now = lane_now(args.now)
local ids = {}
for i, item in ipairs(args.items) do
  ids[i] = item.id
end
local needs = lane_finish_ticks(args, ids, now, false)  -- cron matches (owners.lua)
if needs ~= nil then
  return lane_result(needs)
end
local out = {}
for i, item in ipairs(args.items) do
  local job, refused = lane_owned(item.id, item.token)
  if job == nil then
    out[i] = {refused}
  else
    local after = lane_fail(job, item.reason, given(item.stacktrace), item.discard_retry,
                            item.uniform, given(item.limit), now)
    out[i] = {'ok', after.state, args.want_jobs and after or nil}
  end
end
return lane_result(out)
