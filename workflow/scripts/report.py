from horizon.placeholder import not_implemented

not_implemented("report", issue=6)
