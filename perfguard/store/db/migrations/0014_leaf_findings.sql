-- A sweep that follows the switches may blame a whole leaf switch (its pairs, or its
-- links across the spine), not only a node, an HCA or a link.
ALTER TABLE sweep_finding DROP CONSTRAINT sweep_finding_kind_check;
ALTER TABLE sweep_finding ADD CONSTRAINT sweep_finding_kind_check
    CHECK (kind IN ('node', 'hca', 'link', 'leaf'));
