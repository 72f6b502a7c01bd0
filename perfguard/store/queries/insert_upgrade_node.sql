-- One node's verdict of an upgrade check.
INSERT INTO upgrade_node (label, node, run_id, baseline_id, passed, changed, figure, own_level,
                          drained, resumed)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
