-- The points that are sizes of a curve: {"size": 65536}.
SELECT id, (coords->>'size')::bigint FROM point
WHERE coords ? 'size' AND jsonb_typeof(coords->'size') = 'number'
