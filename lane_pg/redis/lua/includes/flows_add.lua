-- Adding flows (lane._flow_attach, lane.add_flow_nodes, lane.add_flow_children of
-- sql/functions/17_flows.sql): the nodes stored through the add path (includes/add.lua)
-- and attached under their parent (includes/flows.lua holds the dependency rows).
-- @include add
-- @include flows

-- lane._flow_attach (FLOW-1, FLOW-11..13, DEDUP-17): stores the flow nodes `nodes` (the
-- client's {queue, tag, spec, policy, children}) under `parent` (a job table of the queue
-- `ptag`, named `pqueue`) and attaches them, their children too; appends each stored
-- node's {path, tag, queue, id} to `stored`. Per queue, in order of first appearance, one
-- lane_add_specs call stores the new ones. A spec whose dedup id another job owns is not
-- attached; an existing custom-id child is (conflicts were refused before any write:
-- lane_flow_conflict); it counts as processed when completed, failing now when failed.
local function lane_flow_attach(parent, ptag, pqueue, nodes, path, now, stored)
  if #nodes == 0 then
    return
  end
  local queues, groups = {}, {}
  for ord, node in ipairs(nodes) do
    if groups[node.queue] == nil then
      queues[#queues + 1] = node.queue
      groups[node.queue] = {}
    end
    table.insert(groups[node.queue], ord)
  end
  local pending = 0
  local failed, failed_tags = {}, {}
  local nested = {}
  for _, queue in ipairs(queues) do
    local ords = groups[queue]
    local tag = nodes[ords[1]].tag
    lane_in(tag, function()
      lane_ensure_queue(now)
      local specs, holds, policies, children = {}, {}, {}, {}
      for i, ord in ipairs(ords) do
        specs[i] = nodes[ord].spec
        holds[i] = #nodes[ord].children > 0
        policies[i] = nodes[ord].policy
        children[i] = nodes[ord].children
      end
      local saved = LANE_ATTACHING
      LANE_ATTACHING = ptag .. '\n' .. parent.key
      local results, fresh = lane_add_specs(specs, now, {
        queue = queue, parent_queue = pqueue, parent_id = parent.id, ptag = ptag,
        parent_key = parent.key, holds = holds, policies = policies, children = children})
      LANE_ATTACHING = saved
      for i, ord in ipairs(ords) do
        local node = nodes[ord]
        local record = results[i]
        if record and (fresh[i] or record.id == lane_given(node.spec.id)) then
          if not fresh[i] and (record.parent_id ~= parent.id or record.parent_queue ~= pqueue
                               or record.ptag ~= ptag) then
            lane_job_set(record, {parent_queue = pqueue, parent_id = parent.id, ptag = ptag})
          end
          local bucket = (record.state == 'completed') and 'processed' or 'unprocessed'
          local new = lane_in(ptag, function()
            local ref = lane_dep_ref(queue, record.id)
            local dep = lane_dep_get(parent.key, ref)
            if dep ~= nil then  -- FLOW-11: attached before, its row names this job now
              dep.child_key = record.key
              lane_dep_put(parent.key, dep, dep.bucket)
              return false
            end
            local seq = redis.call('HINCRBY', lane_job_key(parent.id), 'deps_seq', 1)
            lane_dep_put(parent.key, {ref = ref, bucket = bucket, policy = node.policy, seq = seq,
                                      child_key = record.key, child_tag = tag}, nil)
            if bucket == 'processed' then  -- FLOW-12
              redis.call('HSET', lane_key('deps:' .. parent.key .. ':values'), ref,
                         record.return_value or 'null')
            end
            return true
          end)
          if new and bucket == 'unprocessed' then
            pending = pending + 1
            if record.state == 'failed' then
              if failed[tag] == nil then
                failed[tag] = {}
                failed_tags[#failed_tags + 1] = tag
              end
              table.insert(failed[tag], record)
            end
          end
          local at = {}
          for j, step in ipairs(path) do
            at[j] = step
          end
          at[#at + 1] = ord
          stored[#stored + 1] = {at, tag, queue, record.id}
          if #node.children > 0 then
            nested[#nested + 1] = {record.id, tag, queue, node.children, at}
          end
        end
      end
    end)
  end
  lane_in(ptag, function()
    local total = redis.call('HINCRBY', lane_job_key(parent.id), 'deps_pending', pending)
    parent.deps_pending = tostring(total)
  end)
  for _, item in ipairs(nested) do
    lane_in(item[2], function()
      local child = lane_job(item[1])
      lane_flow_attach(child, item[2], item[3], item[4], item[5], now, stored)
    end)
  end
  for _, tag in ipairs(failed_tags) do
    lane_in(tag, lane_flow_resolve, failed[tag], 'failed', now)
  end
  lane_in(ptag, function()
    local current = lane_job(parent.id)
    if current ~= nil and current.state == 'waiting-children'
       and tonumber(current.deps_pending) <= 0 then
      lane_flow_release({{ptag, parent.id}}, now)
    end
  end)
end

-- Before any write: the refusal of attaching `nodes` under the parent (`pqueue`, `pid`;
-- `pid` nil for a parent this call creates), or nil. A custom-id node that is a retained
-- parent's child elsewhere conflicts (LN011, ParentConflict); a dedup id reserved by
-- another push refuses the call (lane_add_check).
local function lane_flow_conflict(nodes, pqueue, pid, args, now)
  for _, node in ipairs(nodes) do
    local answer = lane_in(node.tag, function()
      local refused = args and lane_add_check(args, {node.spec}, now)
      if refused then
        return refused
      end
      local custom = lane_given(node.spec.id)
      local job = custom and lane_job(custom)
      if job and job.parent_id ~= nil
         and (job.parent_queue ~= pqueue or job.parent_id ~= pid) then
        local exists = lane_in(job.ptag, function()
          return redis.call('EXISTS', lane_job_key(job.parent_id)) == 1
        end)
        if exists then
          return {error = 'parent_conflict', message = 'job ' .. job.id .. ' of queue '
                  .. node.queue .. ' belongs to parent ' .. job.parent_id .. ' of queue '
                  .. job.parent_queue .. ': remove that dependency (remove_child_dependency)'
                  .. ' before attaching it elsewhere'}
        end
      end
      local below = lane_flow_conflict(node.children, node.queue, custom, args, now)
      return below
    end)
    if answer ~= nil then
      return answer
    end
  end
  return nil
end

-- The stored nodes ({path, tag, queue, id}) as the client reads them: {path, queue, job}
-- read now, after the whole call.
local function lane_flow_rows(stored)
  local rows = {}
  for _, item in ipairs(stored) do
    local job = lane_in(item[2], lane_job, item[4])
    if job ~= nil then
      rows[#rows + 1] = {item[1], item[3], job}
    end
  end
  return rows
end

-- lane._flow_materialise (DEDUP-18, -19): the kept next job of `dedup_id` (its owner row
-- `owner`, of the current queue, just deleted by lane_dedup_finish) stored as the flow node
-- it was: under the parent that still waits for it in its placeholder's place (attached as
-- any child, children of its own included), else as a flow of its own. A node whose custom
-- id (or one below it) is another parent's child is a duplicate of it (ADD-3): the owner's
-- finish stands.
local function lane_flow_materialise(dedup_id, owner, now)
  local spec = cjson.decode(owner.next)
  local children = {}
  if owner.next_children ~= nil then
    children = cjson.decode(owner.next_children)
  end
  local queue = owner.next_queue
  local node = {queue = queue, tag = LANE_TAG, spec = spec, policy = owner.next_policy or 'fail',
                children = children}
  local tag, parent = lane_waiting_parent(owner)
  if parent ~= nil and lane_in(tag, lane_take_placeholder, parent, queue, dedup_id) then
    local pqueue = string.match(owner.next_parent, '^[^\n]*\n([^\n]*)\n')
    if lane_flow_conflict({node}, pqueue, parent.id, nil, now) ~= nil then
      lane_emit('duplicated', lane_given(spec.id), nil, now)
      lane_in(tag, function()
        local current = lane_job(parent.id)
        if current.state == 'waiting-children' and tonumber(current.deps_pending) <= 0 then
          lane_flow_release({{tag, current.id}}, now)
        end
      end)
    else
      lane_flow_attach(parent, tag, pqueue, {node}, {}, now, {})
    end
    return
  end
  local results, fresh = lane_add_specs({spec}, now, {queue = queue, holds = {#children > 0}})
  if #children > 0 and fresh[1] then
    lane_flow_attach(results[1], LANE_TAG, queue, children, {}, now, {})
  end
end
LANE_FLOW.materialise = lane_flow_materialise
