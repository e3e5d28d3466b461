-- A waiting job's member of the queue's waiting index: one sorted set whose scores are all
-- 0, read in member order (ZRANGE ... BYLEX). PostgreSQL orders waiting jobs by
-- lane._order_key (priority * 2^41, plus 2^40 - seq for LIFO, 2^40 + seq for FIFO, plus 0
-- for a job released to the front), then by key; that bigint does not fit a sorted-set
-- score, a double exact to 2^53 only, so the member spells it out in fixed-width digits:
-- 7 for the priority (0..2097152), 13 for the offset within it (0..2^41 - 1), 16 for the
-- key (the tie-break), then the job id. One index: a job without a priority never jumps
-- ahead of one with (bullmq #2081).
local LANE_HALF = 1099511627776  -- 2^40

-- The offset within the priority's bucket; mode: 'fifo', 'lifo' or 'front' (released to
-- the front of its priority).
local function lane_order_offset(mode, seq)
  if mode == 'front' then
    return 0
  elseif mode == 'lifo' then
    return LANE_HALF - seq
  end
  return LANE_HALF + seq
end

local function lane_order_member(priority, mode, seq, key, id)
  return string.format('%07d%013d%016d:%s', priority, lane_order_offset(mode, seq), key, id)
end

-- The job id of a waiting-index member.
local function lane_member_id(member)
  return string.sub(member, 38)
end
