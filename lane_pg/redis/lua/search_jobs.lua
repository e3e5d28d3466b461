-- lane.search_jobs' reads of one batch (read only): the state, name and, with `data`, the
-- data text of each job of `ids`, as one JSON document, so a batch costs one reply to
-- parse rather than one per job. The data stays JSON text (cjson only quotes it): the
-- client matches it (lane_pg.backend.reads). A job that is gone gives ['', '', ''].
-- @include json
-- @include job

local args = lane_args()
local fields = {'state', 'name'}
if args.data then
  fields[3] = 'data'
end
local found = {}
for i, id in ipairs(args.ids) do
  local values = redis.call('HMGET', lane_job_key(id), unpack(fields))
  found[i] = {values[1] or '', values[2] or '', values[3] or ''}
end
return lane_result(found)
