"""The recall world: role-played teams sharing one vector memory, scored on recalling facts."""
