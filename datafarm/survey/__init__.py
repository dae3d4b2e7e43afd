"""The survey: what the calibration footage says about the real scene (cameras, table, objects) and
how well a rebuilt scene matches it (grounding). See datafarm.survey.run for the order of the steps."""
