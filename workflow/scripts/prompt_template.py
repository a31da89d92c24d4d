from horizon.placeholder import not_implemented

not_implemented("rollout", issue=5)
