-- Flows (FLOW), mirroring sql/functions/17_flows.sql: a parent waits in `waiting-children`
-- while its field `deps_pending` (children still unprocessed) is above 0. Each child has one
-- dependency row under its parent, in one bucket: unprocessed, processed (with its value),
-- failed (a failure that fails the parent), ignored (a failure the parent tolerates, with
-- its reason) or removed (gone without a result). The rows are keys of the parent's queue,
-- named by the parent's key (job.lua: lane_deps_keys), so they go with the parent and never
-- name a later job of the same id:
--   deps:<key>           hash: `<child queue>\n<child id>` -> `bucket|policy|seq|child key|child tag`
--   deps:<key>:values    hash: the same -> a processed child's value (JSON text)
--   deps:<key>:reasons   hash: the same -> a failed child's reason
--   deps:<key>:<bucket>  sorted set of the same by attach order (seq), for the four buckets
--                        a page reads (lane.get_flow_dependency_page)
-- A child names its parent with `parent_queue`, `parent_id` and `ptag` (the parent's queue
-- tag). A parent in another queue is reached by switching the tag (lane_in): only on a
-- server where one script reaches every key (lane_pg.redis.flows refuses such a flow on a
-- cluster unless both tags share a slot). Adding flows is in flows_add.lua.
-- @include events

local LANE_FLOW = {}  -- finish.lua's lane_fail_terminal, set there (it calls back in here)

-- The queue name of the current tag, known from a child's parent: both tags are
-- `{<prefix>:<queue>}`, and a queue name holds no brace.
local function lane_flow_own_queue(child)
  local prefix_len = #child.ptag - #child.parent_queue - 3
  return string.sub(LANE_TAG, prefix_len + 3, -2)
end

local function lane_dep_ref(queue, id)
  return queue .. '\n' .. id
end

local function lane_dep_get(pkey, ref)
  local raw = redis.call('HGET', lane_key('deps:' .. pkey), ref)
  if not raw then
    return nil
  end
  local bucket, policy, seq, ckey, ctag = string.match(raw, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
  return {ref = ref, bucket = bucket, policy = policy, seq = tonumber(seq),
          child_key = (ckey ~= '') and ckey or nil, child_tag = ctag}
end

local LANE_PAGED = {processed = true, unprocessed = true, ignored = true, failed = true}

-- Writes the row `dep` of the parent `pkey`, moving it from bucket `was` (nil: new).
local function lane_dep_put(pkey, dep, was)
  local base = 'deps:' .. pkey
  redis.call('HSET', lane_key(base), dep.ref,
             table.concat({dep.bucket, dep.policy, string.format('%d', dep.seq),
                           dep.child_key or '', dep.child_tag}, '|'))
  if was ~= dep.bucket then
    if was ~= nil and LANE_PAGED[was] then
      redis.call('ZREM', lane_key(base .. ':' .. was), dep.ref)
    end
    if LANE_PAGED[dep.bucket] then
      redis.call('ZADD', lane_key(base .. ':' .. dep.bucket), dep.seq, dep.ref)
    end
  end
end

-- lane._flow_policy's result for a child is computed by the client (policy of its node).

-- lane._flow_release (FLOW-3, FLOW-29) of one parent of the current queue: waiting, or
-- delayed while its own delay is not due (against the later of now and its creation).
local function lane_flow_release_one(id, now, due_pass)
  local parent = lane_job(id)
  if parent == nil or parent.state ~= 'waiting-children' then
    return
  end
  local due = tonumber(parent.available_at)
  local is_due = due <= math.max(now, tonumber(parent.created_at))
  if is_due ~= due_pass then
    return
  end
  lane_unindex(parent)
  if is_due then
    lane_enqueue(parent)
    lane_emit('waiting', parent.id, {prev = 'waiting-children'}, now)
    lane_wake()
  else
    lane_job_set(parent, {state = 'delayed'})
    lane_index(parent, due)
    lane_emit('delayed', parent.id, {delay = due, prev = 'waiting-children'}, now)
    lane_wake_at(due)
  end
end

-- Releases the parents `list` ({tag, id}): the due ones first, then the later ones.
local function lane_flow_release(list, now)
  for _, due_pass in ipairs({true, false}) do
    for _, item in ipairs(list) do
      lane_in(item[1], lane_flow_release_one, item[2], now, due_pass)
    end
  end
end

-- lane._flow_resolve's CASE: the bucket a pending dependency moves to.
local function lane_resolved_bucket(outcome, policy)
  if outcome == 'completed' then
    return 'processed'
  end
  if outcome == 'removed' or policy == 'remove' then
    return 'removed'
  end
  if policy == 'ignore' or policy == 'continue' then
    return 'ignored'
  end
  return 'failed'
end

-- lane._flow_resolve (FLOW-3..10, FLOW-26): children of the current queue (job tables)
-- reached `outcome` ('completed', 'failed' or 'removed'); each pending dependency moves to
-- its bucket, each parent's count drops, and a parent is failed (policy 'fail'), marked
-- with a deferred failure, or released, parents in (tag, key) order.
local function lane_flow_resolve(children, outcome, now)
  local own = nil
  local groups, order = {}, {}
  for _, child in ipairs(children) do
    if child.parent_id ~= nil and child.ptag ~= nil then
      own = own or lane_flow_own_queue(child)
      local gk = child.ptag .. '\n' .. child.parent_id
      local group = groups[gk]
      if group == nil then
        local pkey = lane_in(child.ptag, function()
          local found = redis.call('HGET', lane_job_key(child.parent_id), 'key')
          return found or nil
        end)
        if pkey ~= nil then
          group = {tag = child.ptag, id = child.parent_id, key = tonumber(pkey), items = {}}
          groups[gk] = group
          order[#order + 1] = group
        end
      end
      if group ~= nil then
        group.items[#group.items + 1] = child
      end
    end
  end
  table.sort(order, function(a, b)
    if a.tag ~= b.tag then
      return a.tag < b.tag
    end
    return a.key < b.key
  end)
  local release = {}
  for _, group in ipairs(order) do
    lane_in(group.tag, function()
      local parent = lane_job(group.id)
      if parent == nil then
        return
      end
      local n, fail_now, fails, early, why = 0, false, false, false, nil
      for _, child in ipairs(group.items) do
        local dep = lane_dep_get(parent.key, lane_dep_ref(own, child.id))
        if dep ~= nil and dep.bucket == 'unprocessed' then
          n = n + 1
          local base = 'deps:' .. parent.key
          dep.bucket = lane_resolved_bucket(outcome, dep.policy)
          if outcome == 'completed' then
            redis.call('HSET', lane_key(base .. ':values'), dep.ref, child.return_value or 'null')
          elseif outcome == 'failed' and child.failed_reason ~= nil then
            redis.call('HSET', lane_key(base .. ':reasons'), dep.ref, child.failed_reason)
          end
          lane_dep_put(parent.key, dep, 'unprocessed')
          if dep.policy == 'fail' or dep.policy == 'fail-deferred' then
            fails = true
            fail_now = fail_now or dep.policy == 'fail'
            local text = 'child ' .. child.id .. ' of queue ' .. own .. ' failed: '
                         .. (child.failed_reason or '')
            if why == nil or text < why then
              why = text
            end
          end
          if dep.policy == 'continue' or dep.policy == 'fail-deferred' then
            early = true
          end
        end
      end
      if n == 0 then
        return
      end
      local pending = tonumber(parent.deps_pending or '0') - n
      lane_job_set(parent, {deps_pending = pending})
      if outcome == 'failed' and fails then
        if fail_now and parent.state == 'waiting-children' then
          LANE_FLOW.fail_terminal(parent, why, now)  -- FLOW-5, its own parent told in turn
          return
        end
        if parent.state ~= 'completed' and parent.state ~= 'failed'
           and parent.deferred_failure == nil then
          lane_job_set(parent, {deferred_failure = why})  -- FLOW-9
        end
      end
      if parent.state == 'waiting-children'
         and (pending <= 0 or (outcome == 'failed' and early)) then
        release[#release + 1] = {group.tag, group.id}
      end
    end)
  end
  lane_flow_release(release, now)
end

-- lane._flow_restore (FLOW-27): the retried child `child` (of the current queue) is its
-- parent's pending dependency again; a released parent that has not run goes back to
-- waiting-children, and a deferred failure is cleared once no failing child is left.
local function lane_flow_restore(child, now)
  if child.parent_id == nil or child.ptag == nil then
    return
  end
  local own = lane_flow_own_queue(child)
  lane_in(child.ptag, function()
    local parent = lane_job(child.parent_id)
    if parent == nil then
      return
    end
    local dep = lane_dep_get(parent.key, lane_dep_ref(own, child.id))
    if dep == nil or dep.bucket == 'unprocessed' then
      return
    end
    local was = dep.bucket
    local base = 'deps:' .. parent.key
    redis.call('HDEL', lane_key(base .. ':values'), dep.ref)
    redis.call('HDEL', lane_key(base .. ':reasons'), dep.ref)
    dep.bucket, dep.child_key = 'unprocessed', child.key
    lane_dep_put(parent.key, dep, was)
    lane_job_set(parent, {deps_pending = tonumber(parent.deps_pending or '0') + 1})
    if was == 'failed' and redis.call('ZCARD', lane_key(base .. ':failed')) == 0 then
      lane_job_set(parent, {deferred_failure = false})
    end
    if parent.state == 'waiting' or parent.state == 'delayed' then
      local prev = parent.state
      lane_unindex(parent)
      lane_job_set(parent, {state = 'waiting-children', seq = false})
      lane_index(parent)
      lane_emit('waiting-children', parent.id, {prev = prev}, now)
    end
  end)
end

-- FIN-8: a parent with a pending child, or a child failure that fails it, cannot complete.
local function lane_blocked_by_children(job)
  if job.deps_pending == nil then
    return false
  end
  return tonumber(job.deps_pending) > 0 or job.deferred_failure ~= nil
end

-- The children of the current queue's jobs `jobs` that are still pending: told to their
-- parents as removed (FLOW-26), before their records go (lane._remove_jobs).
local function lane_flow_removed(jobs, now)
  local pending = {}
  for _, job in ipairs(jobs) do
    if job.parent_id ~= nil and job.state ~= 'completed' and job.state ~= 'failed' then
      pending[#pending + 1] = job
    end
  end
  if #pending > 0 then
    lane_flow_resolve(pending, 'removed', now)
  end
end

-- ------------------------------------------------ kept next jobs of a flow (DEDUP-18, -19)
-- A flow node kept as a running dedup owner's next job (keep-last) is stored when the
-- owner finishes. Its owner row keeps where it goes: `next_queue` (the owner's queue),
-- `next_policy`, `next_children` (its nodes, JSON) and, for a child, `next_parent`
-- (`<tag>\n<queue>\n<id>\n<key>`); the parent waits for it under a placeholder row
-- (`<queue>\n0:<dedup id>`, no child key: ids starting `0:` are never a job's).

local LANE_ATTACHING = nil  -- `<tag>\n<key>` of the parent whose children are being added
local LANE_REMOVING = {}    -- `<tag>\n<key>` of the jobs a removal deletes

local function lane_placeholder_ref(queue, dedup_id)
  return lane_dep_ref(queue, '0:' .. dedup_id)
end

-- lane._flow_hold (in the parent's queue): the parent waits for the kept next job of
-- `dedup_id` of `queue`; a later candidate for the same parent keeps the row, its policy new.
local function lane_flow_hold(parent, queue, tag, dedup_id, policy)
  local ref = lane_placeholder_ref(queue, dedup_id)
  local dep = lane_dep_get(parent.key, ref)
  if dep ~= nil then
    dep.policy = policy
    lane_dep_put(parent.key, dep, dep.bucket)
    return
  end
  local seq = redis.call('HINCRBY', lane_job_key(parent.id), 'deps_seq', 1)
  lane_dep_put(parent.key, {ref = ref, bucket = 'unprocessed', policy = policy, seq = seq,
                            child_key = nil, child_tag = tag}, nil)
  redis.call('HINCRBY', lane_job_key(parent.id), 'deps_pending', 1)
end

-- The parent (its tag and job table) a kept next job was to join, while it exists.
local function lane_waiting_parent(owner)
  if owner == nil or owner.next_parent == nil then
    return nil, nil
  end
  local tag, queue, id, key = string.match(owner.next_parent, '^([^\n]*)\n([^\n]*)\n(.*)\n([^\n]*)$')
  local parent = lane_in(tag, lane_job, id)
  if parent == nil or parent.key ~= key then
    return nil, nil
  end
  return tag, parent
end

-- The placeholder for `dedup_id` of `queue` leaves the parent's pending set, if there (in
-- the parent's queue).
local function lane_take_placeholder(parent, queue, dedup_id)
  local ref = lane_placeholder_ref(queue, dedup_id)
  local dep = lane_dep_get(parent.key, ref)
  if dep == nil or dep.bucket ~= 'unprocessed' then
    return false
  end
  local base = 'deps:' .. parent.key
  redis.call('HDEL', lane_key(base), ref)
  redis.call('ZREM', lane_key(base .. ':unprocessed'), ref)
  local pending = redis.call('HINCRBY', lane_job_key(parent.id), 'deps_pending', -1)
  parent.deps_pending = tostring(pending)
  return true
end

-- lane._dedup_next_dropped: the kept next job of the owner row `owner` (of `dedup_id`, in
-- the current queue) will never be stored: its parent no longer waits for it, and is
-- released when nothing else is pending (unless its children are being added right now,
-- or it is being removed: those callers look once they are done).
local function lane_dedup_next_dropped(dedup_id, owner, now)
  local tag, parent = lane_waiting_parent(owner)
  if parent == nil then
    return
  end
  local where = tag .. '\n' .. parent.key
  if LANE_REMOVING[where] then
    return
  end
  lane_in(tag, function()
    if lane_take_placeholder(parent, owner.next_queue, dedup_id)
       and parent.state == 'waiting-children' and tonumber(parent.deps_pending) <= 0
       and LANE_ATTACHING ~= where then
      lane_flow_release({{tag, parent.id}}, now)
    end
  end)
end

-- For the add path (add.lua): the flow node of spec `i` of a call adding children of
-- `flow` (see lane_add_specs), or nil.
local function lane_flow_node(flow, i)
  if flow == nil then
    return nil
  end
  local node = {queue = flow.queue, policy = flow.policies and flow.policies[i],
                children = flow.children and flow.children[i]}
  if flow.parent_id ~= nil then
    node.parent = {tag = flow.ptag, queue = flow.parent_queue, id = flow.parent_id,
                   key = flow.parent_key}
  end
  return node
end

-- For the add path: a new job (its fields, not yet written) is a child of `flow`'s parent.
local function lane_flow_child(job, flow)
  if flow ~= nil and flow.parent_id ~= nil then
    job.parent_queue, job.parent_id, job.ptag = flow.parent_queue, flow.parent_id, flow.ptag
  end
end

-- lane._dedup_take's keep-last for a flow node `node` (nil: a plain job) kept as the
-- running owner's next job: the owner row (`owner`, written by the caller) keeps where the
-- node goes, its parent waits for it, and the placeholder of a replaced candidate for
-- another parent goes (DEDUP-18, -19).
local function lane_flow_keep_next(dedup_id, owner, node, now)
  local next_parent = false
  if node ~= nil and node.parent ~= nil then
    local p = node.parent
    next_parent = p.tag .. '\n' .. p.queue .. '\n' .. p.id .. '\n' .. p.key
    local tag = LANE_TAG
    lane_in(p.tag, function()
      lane_flow_hold(lane_job(p.id), node.queue, tag, dedup_id, node.policy)
    end)
  end
  if (owner.next_parent or false) ~= next_parent then
    lane_dedup_next_dropped(dedup_id, owner, now)
  end
  owner.next_parent = next_parent
  owner.next_queue = node ~= nil and node.queue or false
  owner.next_policy = node ~= nil and node.policy or false
  owner.next_children = false
  if node ~= nil and node.children ~= nil and #node.children > 0 then
    owner.next_children = cjson.encode(node.children)
  end
end
