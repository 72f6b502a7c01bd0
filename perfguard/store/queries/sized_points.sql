-- The points that are sizes of a curve ({"size": 65536}) and their sizes.
SELECT id, size FROM sized_point
