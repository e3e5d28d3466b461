-- lane.add_jobs (and add_job, a call of one spec): stores new jobs in input order (ADD-1..13,
-- DEDUP-1..20, REP-1..6) through the add path (includes/add.lua). The client has checked
-- every spec (lane_pg.options) and sends each one's stored fields. Nothing is written when
-- a spec meets another push's reservation or a series with no occurrence left
-- ({error, message}), or when a cron match the call needs is not in `args.cron`
-- ({lane_ticks, now}: the client computes them and calls again). Returns each spec's job,
-- in input order.
-- @include json
-- @include now
-- @include add

local args = lane_args()
local now = lane_now(args.now)
local refused = lane_add_check(args, args.specs, now)
if refused ~= nil then
  return lane_result(refused)
end
lane_ensure_queue(now)
return lane_result(lane_add_specs(args.specs, now))
