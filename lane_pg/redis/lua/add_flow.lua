-- lane.add_flow_nodes (FLOW-1, FLOW-11..13, DEDUP-17, -19): a whole tree. KEYS[1] is the
-- root's queue; the other queues' meta keys follow (includes/flows.lua: lane_in reaches
-- them). The client has checked every node (lane_pg.backend.flows.check_flow) and sends
-- each as {queue, tag, spec, policy, children}. Nothing is written when a node meets
-- another push's reservation, a custom id that is a retained parent's child elsewhere
-- ({error, message}), or a cron match the call needs is not in `args.cron` ({lane_ticks,
-- now}). A root with a custom id that exists keeps its data and state and still takes the
-- new children (FLOW-11); a root whose dedup id another job owns gives that owner and adds
-- nothing (DEDUP-19). Returns {root job, [[path, queue, job], ...]} read after the call.
-- @include json
-- @include now
-- @include finish
-- @include flows_add

local args = lane_args()
local now = lane_now(args.now)
local root = args.root
local custom = lane_given(root.spec.id)
local refused = lane_add_check(args, {root.spec}, now)
-- A root that gives back its deduplication id's holder attaches nothing, so no child of it
-- can conflict (lane.add_flow meets LN011 only while attaching).
if refused == nil and ((custom ~= nil and lane_job(custom) ~= nil)
                       or not lane_dedup_gives_holder(root.spec, now)) then
  refused = lane_flow_conflict(root.children, root.queue, custom, args, now)
end
if refused ~= nil then
  return lane_result(refused)
end
lane_ensure_queue(now)
local results, fresh = lane_add_specs({root.spec}, now, {
  queue = root.queue, holds = {#root.children > 0}, children = {root.children},
  policies = {'fail'}})
local record = results[1]
local stored = {}
if record and (fresh[1] or record.id == custom) then
  lane_flow_attach(record, LANE_TAG, root.queue, root.children, {}, now, stored)
end
return lane_result({record and lane_job(record.id) or false, lane_flow_rows(stored)})
